"""Running what is measured in processes of its own: a command's wall time and peak RSS, a
contender in a fresh Python (`python -m harness.child`), and `embstore serve` on a free port.

A process of its own is what makes a peak RSS the contender's alone, and a fresh interpreter
what makes a load start cold in Python (nothing imported, nothing cached).
"""
import collections
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

BENCH = pathlib.Path(__file__).resolve().parents[1]

GNU_TIME = "/usr/bin/time"


def measured(cmd, env=None):
    """Runs cmd; returns (wall seconds, peak RSS in MiB, stdout text). Fails loudly on error.
    measured_cpu() also gives the CPU seconds it used."""
    wall, rss, text, _ = measured_cpu(cmd, env)
    return wall, rss, text


def measured_cpu(cmd, env=None):
    """Runs cmd; returns (wall seconds, peak RSS in MiB, stdout text, user + system CPU
    seconds of the command and its threads). Fails loudly on error.

    Peak RSS comes from GNU time when it is installed: the kernel's maxrss of a process started
    straight from this one would include this Python process's size at fork. Without GNU time
    the wait4() figure is used, an upper bound."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r") as rss_file:
        full = [str(c) for c in cmd]
        use_time = os.access(GNU_TIME, os.X_OK)
        if use_time:
            full = [GNU_TIME, "-f", "%M", "-o", rss_file.name] + full
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text, errtext = out.read().decode(), err.read().decode()
        rss = usage.ru_maxrss / 1024.0
        cpu = usage.ru_utime + usage.ru_stime
        if use_time:
            rss = int(rss_file.read().split()[-1]) / 1024.0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(map(str, cmd))}\n{errtext}")
    return wall, rss, text, cpu


@contextlib.contextmanager
def environment(env):
    """Sets the variables of `env` in this process for the block, then restores them."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def child_env(**extra):
    """This process's environment with `extra` set and bench/ first on PYTHONPATH, where
    `python -m harness.child` finds the harness."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH), env.get("PYTHONPATH")) if p)
    return env


def child_command(program, *args):
    """The command line that runs contender `program` (a name in harness/child.py)."""
    return [sys.executable, "-m", "harness.child", program] + [str(a) for a in args]


def run_json_child(program, *args, **env):
    """Runs contender `program` in a fresh Python; returns the JSON it prints last, with its
    process's peak RSS added as "peak_rss_mib". `env` adds environment variables."""
    _, rss, out = measured(child_command(program, *args), env=child_env(**env))
    res = json.loads(out.strip().splitlines()[-1])
    res["peak_rss_mib"] = rss
    return res


Server = collections.namedtuple("Server", "target pid metrics_url")


@contextlib.contextmanager
def embstore_server(build, store_dir, metrics=False):
    """`embstore serve` of `store_dir` on a free loopback port, with its Prometheus endpoint on
    another when `metrics`; yields a Server (metrics_url is None without metrics)."""
    cmd = [str(build / "cli" / "embstore"), "serve", "--store", str(store_dir),
           "--listen", "127.0.0.1:0"]
    if metrics:
        cmd += ["--metrics-listen", "127.0.0.1:0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    listening = None
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if entry.get("msg") == "listening":
                    listening = entry
                    break
        if listening is None:
            raise RuntimeError("embstore serve did not report listening")
        # Keep draining its log so the pipe never fills.
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        metrics_url = (f"http://127.0.0.1:{listening['metrics_port']}/metrics" if metrics
                       else None)
        yield Server(listening["addresses"][0], proc.pid, metrics_url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
