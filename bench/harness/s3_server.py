"""A real S3 server on 127.0.0.1 for the object-store benchmark and tests/python/test_s3.py:
scripts/s3-server.sh (SeaweedFS's S3 gateway) on free ports, with signature checking on."""
import contextlib
import os
import random
import socket
import subprocess
import time
import urllib.request

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "s3-server.sh"


def _ports_free(port):
    # The script uses PORT..PORT+3 and each of those plus 10000.
    for p in [port + i for i in range(4)] + [port + 10000 + i for i in range(4)]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def answers(port):
    """GET /status answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def built():
    """(True, path) when the server binary is built, else (False, why)."""
    p = subprocess.run(["bash", str(SCRIPT), "--where"], capture_output=True, text=True)
    return (True, p.stdout.strip()) if p.returncode == 0 else (False, p.stderr.strip())


@contextlib.contextmanager
def s3_server(data_dir, access_key, secret_key, timeout=120):
    """Starts the server with its data in `data_dir`; yields its endpoint, http://127.0.0.1:PORT.
    Killed on exit."""
    env = dict(os.environ, S3_ACCESS_KEY=access_key, S3_SECRET_KEY=secret_key)
    for _ in range(5):
        port = random.randint(20000, 45000)
        if not _ports_free(port):
            continue
        proc = subprocess.Popen(["bash", str(SCRIPT), str(data_dir), str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None and not answers(port):
            time.sleep(0.1)
        if proc.poll() is None and answers(port):
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                proc.kill()
                proc.wait()
            return
        proc.kill()
        proc.wait()
    raise RuntimeError("could not start the S3 server (scripts/s3-server.sh)")
