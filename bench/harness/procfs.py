"""A process's memory as Linux reports it in /proc/PID/status, in MiB: the one place the
benchmarks read it.

VmRSS is what is resident now; VmHWM, the high-water mark, is the most that has been. A process
resets its own mark by writing 5 to /proc/self/clear_refs, so a measurement can start from the
memory it already holds (a zero-initialized variable, an allocated destination) and report only
what the load adds.

Child processes import this module, so it imports nothing heavy.
"""
import threading
import time


def _status_mib(pid, field):
    """/proc/PID/status's `field` in MiB; 0.0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def rss_mib(pid="self"):
    """Resident memory now (VmRSS)."""
    return _status_mib(pid, "VmRSS")


def peak_rss_mib(pid="self"):
    """The most resident memory so far, or since the last reset_peak_rss() (VmHWM)."""
    return _status_mib(pid, "VmHWM")


def reset_peak_rss():
    """Resets this process's high-water mark to what is resident now; returns that, in MiB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return peak_rss_mib()


class RssSampler:
    """Samples another process's RSS every 20 ms while in its `with` block; .peak is the largest
    seen (MiB). For a process that cannot reset its own VmHWM, such as a server already running.
    """

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            time.sleep(0.02)

    def __enter__(self):
        self.peak = rss_mib(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
