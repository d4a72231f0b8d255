package embstore;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.logging.Level;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSCluster.DataNodeProperties;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeDescriptor;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeManager;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.log4j.LogManager;
import org.apache.log4j.PropertyConfigurator;
import sun.misc.Signal;
import sun.misc.SignalHandler;

/**
 * The HDFS test server of scripts/hdfs-server.sh: a MiniDFSCluster (one NameNode, two DataNodes,
 * replication 2, permissions on) whose NameNode serves WebHDFS on 127.0.0.1:PORT, with its data
 * under DIR, and a control endpoint on 127.0.0.1:PORT+1 that stops and restarts DataNodes. It
 * runs until SIGTERM or SIGINT. Usage: HdfsServer DIR PORT (see the script for the details).
 */
public final class HdfsServer {
  private static final String NAME = "hdfs-server";
  private static final int DATANODES = 2;
  private static final String MARKER = ".hdfs-server";
  private static final long STALE_MS = 3000;
  /** With --kerberos, a second principal in user.keytab that owns nothing. */
  private static final String STRANGER = "embstore-stranger";

  /** One DataNode slot: its index stays fixed while MiniDFSCluster's list reorders. */
  private static final class Slot {
    DataNode running;              // null while stopped
    DataNodeProperties stopped;    // what restartDataNode needs, while stopped
    String uuid = "", http = "", xfer = "", ipc = "";

    void record(DataNode dn) {
      running = dn;
      stopped = null;
      uuid = dn.getDatanodeUuid();
      http = "127.0.0.1:" + dn.getInfoPort();
      xfer = "127.0.0.1:" + dn.getXferAddress().getPort();
      ipc = "127.0.0.1:" + dn.getIpcPort();
    }
  }

  private static MiniDFSCluster cluster;
  private static volatile boolean ready;
  private static final Slot[] slots = new Slot[DATANODES];
  private static final PrintStream out = System.out;

  private HdfsServer() {}

  private static void log(String msg) {
    System.err.println(NAME + ": " + msg);
  }

  private static void die(String msg) {
    log(msg);
    System.exit(1);
  }

  public static void main(String[] argv) throws Exception {
    boolean secure = false;
    boolean sasl = false;
    int first = 0;
    for (; first < argv.length && argv[first].startsWith("--"); first++) {
      if (argv[first].equals("--kerberos")) {
        secure = true;
      } else if (argv[first].equals("--sasl")) {
        sasl = true;
      } else {
        die("unknown option " + argv[first]);
      }
    }
    String[] args = java.util.Arrays.copyOfRange(argv, first, argv.length);
    if (args.length != 2 || (sasl && !secure)) {
      die("usage: HdfsServer [--kerberos [--sasl]] DIR PORT");
    }
    int port = -1;
    try {
      port = Integer.parseInt(args[1]);
    } catch (NumberFormatException e) {
      // reported below
    }
    if (port < 1024 || port > 65534) {
      die("PORT must be a number from 1024 to 65534 (got '" + args[1] + "'): PORT+1 is used too");
    }
    quietLogging(System.getenv().getOrDefault("HDFS_SERVER_LOG_LEVEL", "WARN"));

    InetAddress lo = InetAddress.getByName("127.0.0.1");
    HttpServer control;
    try {
      control = HttpServer.create(new InetSocketAddress(lo, port + 1), 16);
    } catch (BindException e) {
      die("port " + (port + 1) + " (PORT+1, the control endpoint) on 127.0.0.1 is busy");
      return;
    }
    try (ServerSocket probe = new ServerSocket(port, 1, lo)) {
      // only checks that the NameNode's HTTP port is free
    } catch (BindException e) {
      die("port " + port + " (PORT, WebHDFS) on 127.0.0.1 is busy");
    }

    File dir = new File(args[0]).getAbsoluteFile();
    boolean format = prepareDir(dir);
    File tmp = new File(dir, "tmp");
    if (!tmp.isDirectory() && !tmp.mkdirs()) {
      die("cannot create " + tmp);
    }
    System.setProperty("java.io.tmpdir", tmp.getPath());

    // --kerberos: the KDC first; it sets the JVM's Kerberos configuration that everything after
    // reads. The user running this gets a principal (and owns "/"), and so does a stranger.
    String user = System.getProperty("user.name");
    Kerberos kerberos = null;
    if (secure) {
      kerberos = Kerberos.start(new File(dir, "kdc"), user, STRANGER);
    }

    Configuration conf = new HdfsConfiguration();
    conf.set("hadoop.tmp.dir", tmp.getPath());
    conf.setInt("dfs.replication", DATANODES);
    conf.setBoolean("dfs.permissions.enabled", true);
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.setLong("dfs.namenode.fs-limits.min-block-size", 1024);
    conf.set("dfs.namenode.http-address", "127.0.0.1:" + port);
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    conf.set("dfs.namenode.http-bind-host", "127.0.0.1");
    conf.set("dfs.namenode.https-address", "127.0.0.1:0");
    // WebHDFS redirects to DatanodeInfo.getHostName(), which is this (MiniDFSCluster sets it too).
    conf.set("dfs.datanode.hostname", "127.0.0.1");
    conf.set("dfs.datanode.https.address", "127.0.0.1:0");
    // A stopped DataNode turns stale after 3 s, and the NameNode then sorts it last in block
    // locations (so a fresh OPEN redirects to the other replica), and dead after about 20 s.
    conf.setInt("dfs.heartbeat.interval", 1);
    conf.setInt("dfs.namenode.heartbeat.recheck-interval", 5000);
    conf.setLong("dfs.namenode.stale.datanode.interval", STALE_MS);
    conf.setBoolean("dfs.namenode.avoid.read.stale.datanode", true);
    conf.setBoolean("dfs.namenode.avoid.write.stale.datanode", true);
    conf.setInt("dfs.namenode.handler.count", 8);
    conf.setInt("dfs.datanode.handler.count", 4);
    conf.setBoolean("dfs.datanode.peer.stats.enabled", false);
    conf.setInt("dfs.datanode.directoryscan.throttle.limit.ms.per.sec", -1);
    if (kerberos != null) {
      kerberos.configure(conf, sasl);
    }

    // Fixed DataNode HTTP and IPC ports (picked free now) so that a restarted DataNode comes
    // back on the same addresses; restartDataNode keeps the transfer port itself.
    int[] dnHttp = freePorts(lo, DATANODES);
    int[] dnIpc = freePorts(lo, DATANODES);

    // SIGTERM and SIGINT stop the cluster from the main thread, outside JVM shutdown (Hadoop's
    // services remove shutdown hooks while stopping, which a JVM shutdown hook cannot do).
    // During the start they end the process at once, as a crash would.
    CountDownLatch signalled = new CountDownLatch(1);
    SignalHandler onSignal = sig -> {
      if (!ready || signalled.getCount() == 0) {
        log(ready ? "second signal: exiting without a clean shutdown"
            : "signal during the start: exiting at once");
        Runtime.getRuntime().halt(128 + sig.getNumber());
      }
      signalled.countDown();
    };
    Signal.handle(new Signal("TERM"), onSignal);
    Signal.handle(new Signal("INT"), onSignal);

    long t0 = System.nanoTime();
    try {
      cluster = new MiniDFSCluster.Builder(conf, dir)
          .numDataNodes(DATANODES)
          .nameNodePort(0)
          .nameNodeHttpPort(port)
          .setDnHttpPorts(dnHttp)
          .setDnIpcPorts(dnIpc)
          .format(format)
          .skipFsyncForTesting(false)
          .checkExitOnShutdown(false)
          .waitSafeMode(false)
          .build();
      cluster.waitActive();
    } catch (BindException e) {
      die("a port was busy while starting HDFS: " + e.getMessage());
    } catch (Exception e) {
      log("starting HDFS failed:");
      e.printStackTrace();
      System.exit(1);
    }
    if (format) {
      Files.writeString(new File(dir, MARKER).toPath(), "formatted\n");
    }
    List<DataNode> dns = cluster.getDataNodes();
    for (int i = 0; i < DATANODES; i++) {
      slots[i] = new Slot();
      slots[i].record(dns.get(i));
    }
    waitOutOfSafeMode(60_000);
    if (kerberos != null) {
      // The superuser is hdfs (the NameNode's principal); the user running this owns "/".
      cluster.getFileSystem().setOwner(new org.apache.hadoop.fs.Path("/"), user, "supergroup");
    }

    control.createContext("/", HdfsServer::handle);
    control.setExecutor(Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, NAME + "-control");
      t.setDaemon(true);
      return t;
    }));
    control.start();

    ready = true;

    InetSocketAddress rpc = cluster.getNameNode().getNameNodeAddress();
    log(String.format("started in %.1f s (%s), data in %s, control on http://127.0.0.1:%d",
        (System.nanoTime() - t0) / 1e9, format ? "formatted" : "existing data", dir, port + 1));
    out.printf("%s: ready on 127.0.0.1:%d (namenode rpc 127.0.0.1:%d, datanodes %d, "
        + "control 127.0.0.1:%d%s)%n",
        NAME, port, rpc.getPort(), DATANODES, port + 1,
        kerberos == null ? "" : ", " + kerberos.describe(user));
    out.flush();

    signalled.await();
    log("stopping");
    if (!System.getenv().containsKey("HDFS_SERVER_LOG_LEVEL")) {
      LogManager.getRootLogger().setLevel(org.apache.log4j.Level.ERROR);
    }
    control.stop(0);
    // Not cluster.shutdown(): that also schedules DIR for deletion at exit.
    try {
      cluster.shutdownDataNodes();
    } catch (Throwable e) {
      log("stopping the datanodes: " + e);
    }
    try {
      cluster.shutdownNameNodes();
    } catch (Throwable e) {
      log("stopping the namenode: " + e);
    }
    if (kerberos != null) {
      kerberos.stop();
    }
    log("stopped");
    System.exit(0);
  }

  /** Whether DIR must be formatted: only when it is new or empty, or a format of ours broke off. */
  private static boolean prepareDir(File dir) throws IOException {
    if (!dir.isDirectory() && !dir.mkdirs()) {
      die("cannot create the data directory " + dir);
    }
    if (!dir.canWrite()) {
      die("the data directory " + dir + " is not writable");
    }
    File marker = new File(dir, MARKER);
    String[] entries = dir.list();
    if (entries == null) {
      die("cannot list the data directory " + dir);
    }
    if (entries.length == 0) {
      Files.writeString(marker.toPath(), "formatting\n");
      return true;
    }
    if (!marker.exists()) {
      die(dir + " is not empty and holds no HDFS of this script (no " + MARKER
          + "): give a new or empty directory");
    }
    String state = Files.readString(marker.toPath()).trim();
    if (!state.equals("formatted")) {
      log("the first start in " + dir + " broke off: formatting again");
      return true;
    }
    return false;
  }

  private static int[] freePorts(InetAddress lo, int n) throws IOException {
    int[] ports = new int[n];
    ServerSocket[] held = new ServerSocket[n];
    try {
      for (int i = 0; i < n; i++) {
        held[i] = new ServerSocket(0, 1, lo);
        ports[i] = held[i].getLocalPort();
      }
    } finally {
      for (ServerSocket s : held) {
        if (s != null) {
          s.close();
        }
      }
    }
    return ports;
  }

  private static void waitOutOfSafeMode(long timeoutMs) throws InterruptedException {
    long end = System.currentTimeMillis() + timeoutMs;
    while (cluster.getNameNode().isInSafeMode()) {
      if (System.currentTimeMillis() > end) {
        log("warning: the NameNode is still in safe mode after " + timeoutMs / 1000
            + " s (blocks missing?); writes will fail until it leaves");
        return;
      }
      Thread.sleep(100);
    }
  }

  private static void quietLogging(String level) {
    Properties p = new Properties();
    p.setProperty("log4j.rootLogger", level + ", stderr");
    p.setProperty("log4j.appender.stderr", "org.apache.log4j.ConsoleAppender");
    p.setProperty("log4j.appender.stderr.Target", "System.err");
    boolean quiet = level.equalsIgnoreCase("WARN");
    // At the default level a stack trace is cut to its first line (the exception and message).
    p.setProperty("log4j.appender.stderr.layout", "org.apache.log4j.EnhancedPatternLayout");
    p.setProperty("log4j.appender.stderr.layout.ConversionPattern",
        "hdfs-server: %d{HH:mm:ss.SSS} %p %c{1}: %m%n"
            + (quiet ? "%throwable{short}" : "%throwable"));
    if (quiet) {
      // Expected on a test machine, and said at WARN on every start.
      for (String name : new String[] {
          "org.apache.hadoop.util.NativeCodeLoader",
          "org.apache.hadoop.metrics2.impl.MetricsConfig",
          "org.apache.hadoop.http.HttpRequestLog",
          "org.apache.hadoop.hdfs.server.common.Util",
          "org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit",
          "org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace",
          "org.apache.hadoop.security.authentication.server.AuthenticationFilter",
          "org.apache.hadoop.hdfs.server.datanode.web.DatanodeHttpServer",
          // A DataNode stopping (control endpoint or exit), and the DataNode-side client
          // failing over from a stopped one (DFSClient still says so in one line).
          "org.apache.hadoop.fs.CachingGetSpaceUsed",
          "org.apache.hadoop.hdfs.server.datanode.DataSetLockManager",
          "org.apache.hadoop.hdfs.server.datanode.IncrementalBlockReportManager",
          "org.apache.hadoop.hdfs.client.impl.BlockReaderFactory",
      }) {
        p.setProperty("log4j.logger." + name, "ERROR");
      }
      String[] dropped = {
          "Command processor encountered interrupt and exit",
          "Ending command processor service",
          "dfsUsed file missing",     // on each new DataNode volume
      };
      for (int i = 0; i < dropped.length; i++) {
        String f = "log4j.appender.stderr.filter." + (i + 1);
        p.setProperty(f, "org.apache.log4j.varia.StringMatchFilter");
        p.setProperty(f + ".StringToMatch", dropped[i]);
        p.setProperty(f + ".AcceptOnMatch", "false");
      }
    }
    LogManager.resetConfiguration();
    PropertyConfigurator.configure(p);
    java.util.logging.Logger.getLogger("").setLevel(Level.SEVERE);
  }

  // The control endpoint.

  private static void handle(HttpExchange ex) throws IOException {
    int status = 200;
    String body;
    try {
      String path = ex.getRequestURI().getPath();
      String method = ex.getRequestMethod();
      if (path.equals("/datanodes")) {
        body = method.equals("GET") ? datanodesJson() : null;
      } else if (path.equals("/datanode/stop") || path.equals("/datanode/restart")) {
        if (method.equals("POST")) {
          int index = indexParam(ex.getRequestURI());
          body = path.endsWith("stop") ? stop(index, flag(ex.getRequestURI(), "dead"))
              : restart(index);
        } else {
          body = null;
        }
      } else {
        status = 404;
        body = error("no such endpoint: GET /datanodes, POST /datanode/stop?index=N, "
            + "POST /datanode/restart?index=N");
      }
      if (body == null) {
        status = 405;
        body = error("method " + method + " not allowed on " + path);
      }
    } catch (IllegalArgumentException e) {
      status = 400;
      body = error(e.getMessage());
    } catch (IllegalStateException e) {
      status = 409;
      body = error(e.getMessage());
    } catch (Exception e) {
      status = 500;
      body = error(e.toString());
      log("control: " + e);
    }
    byte[] bytes = (body + "\n").getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", "application/json");
    ex.sendResponseHeaders(status, bytes.length);
    try (OutputStream os = ex.getResponseBody()) {
      os.write(bytes);
    }
  }

  private static int indexParam(URI uri) {
    String q = uri.getRawQuery();
    if (q != null) {
      for (String kv : q.split("&")) {
        if (kv.startsWith("index=")) {
          try {
            int i = Integer.parseInt(kv.substring(6));
            if (i >= 0 && i < DATANODES) {
              return i;
            }
          } catch (NumberFormatException e) {
            // reported below
          }
          throw new IllegalArgumentException("index must be 0.." + (DATANODES - 1));
        }
      }
    }
    throw new IllegalArgumentException("missing ?index=N (0.." + (DATANODES - 1) + ")");
  }

  private static boolean flag(URI uri, String name) {
    String q = uri.getRawQuery();
    if (q != null) {
      for (String kv : q.split("&")) {
        if (kv.equals(name) || kv.equals(name + "=1") || kv.equals(name + "=true")) {
          return true;
        }
      }
    }
    return false;
  }

  private static String stop(int index, boolean dead) throws Exception {
    synchronized (slots) {
      Slot s = slots[index];
      if (s.running == null && !dead) {
        throw new IllegalStateException("datanode " + index + " is already stopped");
      }
      if (s.running != null) {
        stopSlot(s);
      }
      if (dead) {
        markDead(s);
      }
      log("datanode " + index + " stopped (" + s.xfer + ")"
          + (dead ? ", dead for the namenode" : ""));
      return datanodeJson(index);
    }
  }

  /**
   * Tells the NameNode now what it would see after missed heartbeats: the DataNode is dead (what
   * MiniDFSCluster.setDataNodeDead does, whose helpers need JUnit). The two package-private calls
   * are reached by reflection, which the class path allows.
   */
  private static void markDead(Slot s) throws Exception {
    DatanodeDescriptor d = descriptor(s);
    if (d == null) {
      return;
    }
    d.setLastUpdate(0);
    d.setLastUpdateMonotonic(0);
    DatanodeManager dm = cluster.getNamesystem().getBlockManager().getDatanodeManager();
    Method getHm = DatanodeManager.class.getDeclaredMethod("getHeartbeatManager");
    getHm.setAccessible(true);
    Object hm = getHm.invoke(dm);
    Method check = hm.getClass().getDeclaredMethod("heartbeatCheck");
    check.setAccessible(true);
    check.invoke(hm);
  }

  private static void stopSlot(Slot s) {
    int i = cluster.getDataNodes().indexOf(s.running);
    DataNodeProperties props = cluster.stopDataNode(i);
    if (props == null) {
      throw new IllegalStateException("MiniDFSCluster does not know the datanode " + s.xfer);
    }
    s.stopped = props;
    s.running = null;
  }

  private static String restart(int index) throws Exception {
    synchronized (slots) {
      Slot s = slots[index];
      if (s.running != null) {
        stopSlot(s);
      }
      cluster.restartDataNode(s.stopped, true);
      List<DataNode> dns = cluster.getDataNodes();
      DataNode dn = dns.get(dns.size() - 1);
      cluster.waitDatanodeFullyStarted(dn, 60_000);
      s.record(dn);
      // Until its first block report the NameNode does not list it as a replica.
      long end = System.currentTimeMillis() + 30_000;
      while (System.currentTimeMillis() < end) {
        DatanodeDescriptor d = descriptor(s);
        if (d != null && d.isAlive() && d.checkBlockReportReceived()) {
          break;
        }
        Thread.sleep(50);
      }
      log("datanode " + index + " restarted (" + s.xfer + ")");
      return datanodeJson(index);
    }
  }

  private static DatanodeDescriptor descriptor(Slot s) {
    return cluster.getNamesystem().getBlockManager().getDatanodeManager().getDatanode(s.uuid);
  }

  private static String datanodesJson() {
    synchronized (slots) {
      StringBuilder b = new StringBuilder("[");
      for (int i = 0; i < DATANODES; i++) {
        b.append(i == 0 ? "" : ",").append(datanodeJson(i));
      }
      return b.append("]").toString();
    }
  }

  /**
   * {"index":0,"alive":true,"http":"127.0.0.1:P","xfer":..,"ipc":..,"uuid":..,
   * "namenode":"live"}
   */
  private static String datanodeJson(int i) {
    Slot s = slots[i];
    DatanodeDescriptor d = descriptor(s);
    String nn = d == null ? "unknown"
        : !d.isAlive() ? "dead" : d.isStale(STALE_MS) ? "stale" : "live";
    return "{\"index\":" + i + ",\"alive\":" + (s.running != null && s.running.isDatanodeUp())
        + ",\"http\":" + str(s.http) + ",\"xfer\":" + str(s.xfer) + ",\"ipc\":" + str(s.ipc)
        + ",\"uuid\":" + str(s.uuid) + ",\"namenode\":" + str(nn) + "}";
  }

  private static String error(String msg) {
    return "{\"error\":" + str(msg) + "}";
  }

  private static String str(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }
}
