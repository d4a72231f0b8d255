"""Checks an installed embstore wheel, in whatever environment it was installed into (a fresh venv
of this machine, a Debian 11 root, an arm64 root under qemu). Run by scripts/test-wheels.sh with
the environment's own python; needs only the wheel and numpy.

1. `embstore --help` runs (its launcher imports neither numpy nor the package), no gRPC, protobuf or abseil library of the system is loaded, and the
   package and the CLI both pick the best kernel level /proc/cpuinfo says this CPU runs.
2. A text table (with keys, awkward numbers) converts with every parse kernel this CPU runs; each
   kernel's table is byte-identical to the scalar reference's (but for its creation time), for f32, f16 and bf16 (with the
   overflow check on), and `embstore verify` passes on each.
3. The table loads from the file, and from a server (`embstore serve` on a unix socket) through
   the Python package, equal to numpy's own parse of the text.

Prints one line per step and "check_wheel: ok" at the end; exits non-zero on the first failure.
"""
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time


def fail(msg):
    print(f"check_wheel: FAILED: {msg}", flush=True)
    sys.exit(1)


def run(args, **kw):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        fail(f"{' '.join(map(str, args))} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def write_text_table(path, rows, dim, seed=7):
    """A GloVe-style file: a key then dim numbers per line, mixing the shapes real files have
    (np.savetxt's %.18e, %.8g, short decimals, signs, large and tiny exponents, values past the
    f16 range) so every kernel path and the f16/bf16 rounding are exercised."""
    rng = random.Random(seed)
    shapes = [
        lambda x: "%.18e" % x,
        lambda x: "%.8g" % x,
        lambda x: "%.4f" % x,
        lambda x: "%g" % x,
        lambda x: "%+.6e" % x,
    ]
    lines = []
    for i in range(rows):
        shape = shapes[i % len(shapes)]
        vals = []
        for _ in range(dim):
            u = rng.random()
            if u < 0.02:
                x = rng.choice([70000.0, -65520.0, 65504.0, 1e-8, -3e-41, 0.0])
            else:
                x = rng.gauss(0.0, 1.0) * 10 ** rng.randint(-3, 2)
            vals.append(shape(x))
        lines.append(f"w{i} " + " ".join(vals))
    path.write_text("\n".join(lines) + "\n")


def main():
    import numpy as np

    import embstore

    exe = shutil.which("embstore")
    if exe is None:
        fail("the `embstore` command is not on PATH")
    r = run([exe, "--help"])
    if "convert" not in r.stdout or "serve" not in r.stdout:
        fail(f"embstore --help does not list its commands:\n{r.stdout}")
    r = run([sys.executable, "-c", "import sys, _embstore_cli; print(_embstore_cli._binary()); "
             "print(sorted(m for m in ('numpy', 'embstore') if m in sys.modules))"])
    binary, imported = r.stdout.split("\n")[:2]
    if imported != "[]" or not os.path.samefile(binary, pathlib.Path(embstore.__file__).parent
                                                / "bin" / "embstore"):
        fail(f"the `embstore` launcher imports {imported} or runs {binary}, not the package's CLI")
    native = pathlib.Path(embstore._native.__file__)
    maps = pathlib.Path("/proc/self/maps").read_text() if os.path.exists("/proc/self/maps") else ""
    for lib in ("libgrpc", "libprotobuf", "libabsl"):
        if lib in maps:
            fail(f"a system {lib} is loaded into the process: {maps}")
    print(f"check_wheel: help ok; module {native.name}; kernel {embstore.active_kernel}; "
          f"python {sys.version.split()[0]}; numpy {np.__version__}", flush=True)
    best = best_kernel()
    if embstore.active_kernel != best:
        fail(f"the package runs the {embstore.active_kernel} kernel, but this CPU runs {best} "
             "(/proc/cpuinfo): the wheel's CPU probe is wrong")

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="embstore-wheel-check-"))
    try:
        rows, dim = 20000, 24
        src = tmp / "vectors.txt"
        write_text_table(src, rows, dim)
        kernels = ["scalar"] + [k for k in ("avx2", "avx512", "neon") if supported(exe, k, src, tmp)]
        print(f"check_wheel: kernels here: {', '.join(kernels)}", flush=True)
        if kernels[-1] != best:
            fail(f"the CLI's best kernel is {kernels[-1]}, but this CPU runs {best}")
        tables = {}
        for dtype in ("f32", "f16", "bf16"):
            for k in kernels:
                out = tmp / f"t-{k}-{dtype}.emb"
                env = dict(os.environ, EMBSTORE_FORCE_KERNEL=k)
                extra = ["--on-overflow", "inf"] if dtype != "f32" else []
                run([exe, "convert", src, out, "--dtype", dtype, "--threads", "2", *extra], env=env)
                run([exe, "verify", out])
                tables[k, dtype] = without_created_time(out.read_bytes())
            for k in kernels[1:]:
                if tables[k, dtype] != tables["scalar", dtype]:
                    fail(f"the {k} kernel's {dtype} table differs from the scalar reference's")
        print(f"check_wheel: {len(kernels)} kernels x f32/f16/bf16 identical to scalar, verified",
              flush=True)

        want = np.loadtxt(src, usecols=range(1, dim + 1), dtype=np.float32)
        store = tmp / "store"
        store.mkdir()
        shutil.copy(tmp / "t-scalar-f32.emb", store / "t.emb")
        got = embstore.load(str(store / "t.emb"))
        if got.shape != (rows, dim) or not np.array_equal(got, want):
            fail(f"the file loaded as {got.shape}, not numpy's parse of the text")
        sock = tmp / "s.sock"
        server = subprocess.Popen([exe, "serve", "--store", str(store), "--listen", f"unix:{sock}",
                                   "--log-level", "warn"])
        try:
            run([exe, "health", "--from", f"unix:{sock}", "--wait", "60"])
            remote = embstore.load(f"unix:{sock}", "t", local=False)
            if not np.array_equal(remote, want):
                fail("the table loaded from the server differs from the file")
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                fail("embstore serve did not stop on SIGTERM within 30 s")
        if server.returncode != 0:
            fail(f"embstore serve exited {server.returncode} on SIGTERM")
        print(f"check_wheel: loads from a file and from a server equal np.loadtxt "
              f"({rows} x {dim})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("check_wheel: ok", flush=True)


def without_created_time(table):
    """The table's bytes with its `embstore.created` timestamp blanked (same length), so tables
    converted a second apart compare equal byte for byte everywhere else."""
    def blank(m):
        return m.group(1) + b"-" * len(m.group(2)) + b'"'
    return re.sub(rb'("embstore\.created":")([^"]*)"', blank, table, count=1)


def best_kernel():
    """The best kernel level this CPU runs, from the kernel's own reading of CPUID (Linux lists a
    feature in /proc/cpuinfo only when the OS also saves its registers); neon on aarch64."""
    import platform
    if platform.machine() == "aarch64":
        return "neon"
    flags = set()
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if not {"avx2", "fma", "f16c", "bmi1", "bmi2"} <= flags:
        return "scalar"
    return "avx512" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags else "avx2"


def supported(exe, kernel, src, tmp):
    """Whether this CPU runs `kernel`: forcing one it cannot run prints a warning and falls back."""
    r = subprocess.run([exe, "convert", str(src), str(tmp / "probe.emb"), "--force"],
                       env=dict(os.environ, EMBSTORE_FORCE_KERNEL=kernel), capture_output=True,
                       text=True)
    return r.returncode == 0 and "EMBSTORE_FORCE_KERNEL" not in r.stderr


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"check_wheel: {time.monotonic() - started:.1f} s", flush=True)
