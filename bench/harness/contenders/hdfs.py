"""Reading the seed table from a real HDFS on this machine (scripts/hdfs-server.sh: a
MiniDFSCluster, a NameNode and two DataNodes from Hadoop's jars).

Downloads, each writing the table to a local file:
- `embstore pull` (the NameNode over WebHDFS, the blocks straight from the DataNodes with
  Hadoop's data transfer protocol; parallel ranged reads of one version, every block verified);
- Hadoop's own Java client, `FsShell -get` over HDFS RPC, from the same jars as the cluster (the
  JVM's start is part of it, as it is for a user who runs `hdfs dfs -get`);
- hdfs-native (a Rust client speaking HDFS RPC and the DataNode protocol, no JVM), its
  read_range_stream written to the file;
- pyarrow's HadoopFileSystem, which needs libhdfs.so (JNI) and a Hadoop classpath: reported as
  not available where libhdfs cannot be found.

Loads into a trainer's memory: `embstore.load(URL)` into numpy and `embstore.tf.initialize` into
a TF1 variable, against hdfs-native's bytes read into numpy with safetensors (the file is a
safetensors file) and fed to the variable with the placeholder/feed_dict workaround.

Each case runs in a fresh process (harness.child) and reports its wall time."""
import os
import pathlib
import subprocess
import time

DOWNLOADS = ["embstore pull", "Hadoop FsShell -get", "hdfs-native", "pyarrow HadoopFileSystem"]
LOADS = ["embstore.load -> numpy", "hdfs-native + safetensors -> numpy",
         "embstore.tf.initialize -> TF1 variable", "hdfs-native + feed_dict -> TF1 variable"]


def _hdfs_native_bytes(rpc_url, path):
    from hdfs_native import Client
    with Client(rpc_url).read(path) as reader:
        return reader.read()


def _path(url):
    """The path of hdfs://HOST:PORT/PATH."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def download(case, embstore_bin, url, rpc_url, out, java_classpath):
    """Copies the table at `url` (WebHDFS) / `rpc_url` (HDFS RPC) to the file `out`."""
    path = _path(url)
    t0 = time.perf_counter()
    if case == "embstore pull":
        subprocess.run([embstore_bin, "pull", "--from", url, "--out", out, "--force"],
                       check=True, stdout=subprocess.DEVNULL)
    elif case == "Hadoop FsShell -get":
        subprocess.run(["java", "-Xmx1g", "-cp", java_classpath, "org.apache.hadoop.fs.FsShell",
                        "-fs", rpc_url, "-get", "-f", path, out], check=True,
                       stdout=subprocess.DEVNULL)
    elif case == "hdfs-native":
        from hdfs_native import Client
        with Client(rpc_url).read(path) as reader, open(out, "wb") as f:
            for chunk in reader.read_range_stream(0, len(reader)):
                f.write(chunk)
    elif case == "pyarrow HadoopFileSystem":
        # What libhdfs needs besides itself: a JVM and the Hadoop jars (the cluster's own).
        if "JAVA_HOME" not in os.environ:
            java = os.path.realpath(subprocess.run(["sh", "-c", "command -v java"],
                                                   capture_output=True, text=True).stdout.strip())
            os.environ["JAVA_HOME"] = os.path.dirname(os.path.dirname(java))
        os.environ.setdefault("CLASSPATH", java_classpath)
        from pyarrow import fs
        host, port = rpc_url.split("://", 1)[1].split(":")
        try:
            hdfs = fs.HadoopFileSystem(host, int(port))
        except OSError as e:  # no libhdfs.so, no JVM or no Hadoop classpath
            return {"case": case, "unavailable": str(e).splitlines()[0]}
        with hdfs.open_input_stream(path) as src, open(out, "wb") as f:
            while chunk := src.read(16 << 20):
                f.write(chunk)
    else:
        raise ValueError(f"unknown case {case!r}")
    seconds = time.perf_counter() - t0
    return {"case": case, "seconds": seconds, "bytes": os.path.getsize(out)}


def load(case, url, rpc_url, rows, dim):
    """Loads the table at `url` into memory the way `case` (one of LOADS) does."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    rows, dim = int(rows), int(dim)
    out = {"case": case}
    if case.endswith("numpy"):
        t0 = time.perf_counter()
        if case.startswith("embstore"):
            import embstore
            matrix = embstore.load(url)
        else:
            from safetensors.numpy import load as st_load
            matrix = st_load(_hdfs_native_bytes(rpc_url, _path(url)))["embedding"]
        out["seconds"] = time.perf_counter() - t0
        out["check"] = float(matrix[rows - 1, dim - 1])
        return out
    import tensorflow as tf
    graph = tf.Graph()
    with graph.as_default():
        variable = tf.compat.v1.get_variable("item_mat", [rows, dim],
                                             initializer=tf.compat.v1.zeros_initializer())
        placeholder = tf.compat.v1.placeholder(tf.float32, [rows, dim])
        assign = variable.assign(placeholder)
        init = tf.compat.v1.global_variables_initializer()
        sess = tf.compat.v1.Session(graph=graph)
        sess.run(init)
        t0 = time.perf_counter()
        if case.startswith("embstore"):
            import embstore.tf
            embstore.tf.initialize(sess, {variable: None}, url)
        else:
            from safetensors.numpy import load as st_load
            matrix = st_load(_hdfs_native_bytes(rpc_url, _path(url)))["embedding"]
            sess.run(assign, {placeholder: matrix})
            del matrix
        out["seconds"] = time.perf_counter() - t0
        out["check"] = float(sess.run(variable[rows - 1, dim - 1]))
    return out


def client_conf(directory):
    """A folder for the Java client's classpath: empty core-site.xml and hdfs-site.xml (Hadoop's
    Configuration asks for them) and a log4j.properties that keeps it to errors."""
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name in ("core-site.xml", "hdfs-site.xml"):
        (d / name).write_text("<configuration/>\n")
    (d / "log4j.properties").write_text(
        "log4j.rootLogger=ERROR,stderr\n"
        "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stderr.Target=System.err\n"
        "log4j.appender.stderr.layout=org.apache.log4j.SimpleLayout\n")
    return d
