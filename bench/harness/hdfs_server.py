"""A real HDFS on 127.0.0.1 for the HDFS benchmark and tests/python/test_hdfs.py:
scripts/hdfs-server.sh (a MiniDFSCluster: a NameNode and two DataNodes from Hadoop's jars) on free
ports, WebHDFS on PORT and the script's control endpoint on PORT+1."""
import contextlib
import pathlib
import random
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "hdfs-server.sh"


def _port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _control(port, method, path):
    req = urllib.request.Request(f"http://127.0.0.1:{port + 1}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except OSError:
        return 0


def built():
    """(True, path) when the cluster is built, else (False, why)."""
    p = subprocess.run(["bash", str(SCRIPT), "--where"], capture_output=True, text=True)
    return (True, p.stdout.strip()) if p.returncode == 0 else (False, p.stderr.strip())


class Cluster:
    def __init__(self, port, rpc_port, kerberos=None, data_dir=None):
        self.port = port
        self.data_dir = pathlib.Path(data_dir) if data_dir else None  # the cluster's files
        self.url = f"hdfs://127.0.0.1:{port}"
        self.webhdfs = f"http://127.0.0.1:{port}/webhdfs/v1"
        # HDFS RPC (the NameNode's own protocol), for Hadoop's Java client and hdfs-native.
        self.rpc_url = f"hdfs://127.0.0.1:{rpc_port}"
        # A kerberized cluster (hdfs_server(kerberos=True)): {"krb5_conf", "keytab", "user",
        # "realm"}, for KRB5_CONFIG and `kinit -kt KEYTAB USER@REALM` (or the keytab's other
        # principal, embstore-stranger, who owns nothing).
        self.kerberos = kerberos

    def stop_datanode(self, index):
        assert _control(self.port, "POST", f"/datanode/stop?index={index}") == 200

    def restart_datanode(self, index):
        assert _control(self.port, "POST", f"/datanode/restart?index={index}") == 200

    def block_files(self, path):
        """{block id: [its replicas' files]} of the HDFS file `path`, from the DataNodes'
        directories (MiniDFSCluster's DIR/data/dataN/current/BP-*/current/finalized/...)."""
        import getpass
        import json
        url = (f"{self.webhdfs}{path}?op=GET_BLOCK_LOCATIONS&offset=0&length=1000000000000"
               f"&user.name={urllib.parse.quote(getpass.getuser())}")
        with urllib.request.urlopen(url, timeout=60) as r:
            blocks = json.load(r)["LocatedBlocks"]["locatedBlocks"]
        return {b["block"]["blockId"]: sorted(self.data_dir.glob(
                    f"data/data*/current/BP-*/current/finalized/**/blk_{b['block']['blockId']}"))
                for b in blocks}

    def put(self, local, path):
        """Writes the local file as `path` the way any WebHDFS client does, as the cluster's
        superuser (this process's user): CREATE at the NameNode, which redirects (307) to a
        DataNode, then the bytes to that DataNode."""
        import getpass
        url = (f"{self.webhdfs}{path}?op=CREATE&overwrite=true&user.name="
               f"{urllib.parse.quote(getpass.getuser())}")
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=60)
            raise RuntimeError(f"WebHDFS CREATE of {path} did not redirect to a DataNode")
        except urllib.error.HTTPError as e:
            if e.code != 307:
                raise RuntimeError(f"WebHDFS CREATE of {path}: HTTP {e.code} {e.read()[:500]}")
            location = e.headers["Location"]
        size = pathlib.Path(local).stat().st_size
        with open(local, "rb") as f:
            req = urllib.request.Request(location, data=f, method="PUT",
                                         headers={"Content-Length": str(size),
                                                  "Content-Type": "application/octet-stream"})
            with urllib.request.urlopen(req, timeout=600) as r:
                assert r.status == 201, r.status


@contextlib.contextmanager
def hdfs_server(data_dir, timeout=240, kerberos=False, sasl=False, java_opts=None):
    """Starts the cluster with its data in `data_dir` (kerberized with `kerberos`: SPNEGO,
    delegation and block tokens, a MiniKdc; with `sasl` too, DataNodes that want SASL on their
    transfer ports; `java_opts`: more JVM options, HDFS_SERVER_JAVA_OPTS); yields a Cluster.
    Stopped on exit."""
    import os
    env = dict(os.environ, HDFS_SERVER_JAVA_OPTS=java_opts) if java_opts else None
    for _ in range(5):
        port = random.randint(20000, 45000)
        if not (_port_free(port) and _port_free(port + 1)):
            continue
        # Its log goes to a file: a pipe nobody reads would stall the cluster once full.
        log = tempfile.TemporaryFile(mode="w+")
        ready = tempfile.TemporaryFile(mode="w+")
        flags = (["--kerberos"] if kerberos else []) + (["--sasl"] if sasl else [])
        proc = subprocess.Popen(["bash", str(SCRIPT)] + flags + [str(data_dir), str(port)],
                                stdout=ready, stderr=log, text=True, env=env)
        deadline = time.monotonic() + timeout
        up = False
        while time.monotonic() < deadline and proc.poll() is None:
            if _control(port, "GET", "/datanodes") == 200:
                up = True
                break
            time.sleep(0.25)
        if up:
            # "hdfs-server: ready on 127.0.0.1:PORT (namenode rpc 127.0.0.1:N, ...)", printed
            # just after the control endpoint starts answering.
            rpc = None
            while rpc is None and time.monotonic() < deadline:
                ready.seek(0)
                line = ready.read()
                rpc = re.search(r"namenode rpc [0-9.]+:([0-9]+)", line)
                time.sleep(0 if rpc else 0.05)
            ready.close()
            krb = re.search(r"kerberos (\S+): KRB5_CONFIG=(\S+), keytab (\S+) for ([^@\s]+)@",
                            line)
            krb = krb and {"realm": krb.group(1), "krb5_conf": krb.group(2),
                           "keytab": krb.group(3), "user": krb.group(4)}
            try:
                yield Cluster(port, int(rpc.group(1)) if rpc else 0, krb, data_dir)
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                log.close()
            return
        proc.kill()
        proc.wait()
        ready.close()
        log.seek(0)
        err = log.read()
        log.close()
        if "Address already in use" not in (err or ""):
            raise RuntimeError(f"could not start the HDFS cluster (scripts/hdfs-server.sh): {err}")
    raise RuntimeError("no free ports for the HDFS cluster (scripts/hdfs-server.sh)")
