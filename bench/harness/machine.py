"""What a run is measured on: CPU, cores, memory, kernel, library versions and the commit."""
import contextlib
import datetime
import os
import platform
import subprocess

from harness.data import ROOT


def machine_description(build):
    import numpy
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "build_dir": str(build),
    }
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    versions = {"numpy": numpy.__version__}
    for mod in ["pandas", "pyarrow", "gensim", "safetensors", "matplotlib"]:
        with contextlib.suppress(Exception):
            versions[mod] = __import__(mod).__version__
    # TF and torch are slow to import; ask their package metadata instead.
    from importlib import metadata
    for dist in ["tensorflow-cpu", "tensorflow", "torch", "grpcio"]:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    with contextlib.suppress(Exception):
        iperf = subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout
        versions["iperf3"] = iperf.split()[1]
    import embstore
    versions["embstore"] = getattr(embstore, "__version__", "unknown")
    info["versions"] = versions
    info["embstore_active_kernel"] = embstore.active_kernel
    with contextlib.suppress(Exception):
        info["git_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short",
                                             "HEAD"], capture_output=True, text=True).stdout.strip()
    return info
