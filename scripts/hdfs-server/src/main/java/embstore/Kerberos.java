package embstore;

import java.io.File;
import java.nio.file.Files;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.authentication.util.KerberosName;

/**
 * The Kerberos side of `hdfs-server.sh --kerberos`: a MiniKdc (TCP, a free port), the service
 * principals and keytabs, the cluster's security settings (SPNEGO on WebHDFS, block access
 * tokens, delegation tokens), and a krb5.conf and a keytab for MIT clients (kinit, libcurl's
 * GSS-API) under DIR/kdc.
 *
 * <p>The NameNode and DataNodes log in as hdfs/localhost (so "hdfs" is the HDFS superuser); the
 * WebHDFS filter accepts any HTTP/ principal in the service keytab, HTTP/localhost and
 * HTTP/127.0.0.1, because a client asks for HTTP/HOST of the URL it was given. The DataNodes run
 * on unprivileged ports (ignore.secure.ports.for.testing), with or without SASL on them.
 */
final class Kerberos {
  private final MiniKdc kdc;
  private final File dir;
  private final File serviceKeytab;
  final File clientConf;
  final File userKeytab;
  final String realm;

  private Kerberos(MiniKdc kdc, File dir) {
    this.kdc = kdc;
    this.dir = dir;
    this.realm = kdc.getRealm();
    this.serviceKeytab = new File(dir, "service.keytab");
    this.clientConf = new File(dir, "krb5.conf");
    this.userKeytab = new File(dir, "user.keytab");
  }

  /** Starts the KDC with its files under `dir` and makes the principals: the services', and
   * each of `users` (in user.keytab). Must run before anything touches Hadoop's security. */
  static Kerberos start(File dir, String... users) throws Exception {
    if (!dir.isDirectory() && !dir.mkdirs()) {
      throw new IllegalStateException("cannot create " + dir);
    }
    Properties conf = MiniKdc.createConf();
    conf.setProperty(MiniKdc.KDC_PORT, "0");
    File work = new File(dir, "work");
    if (!work.isDirectory() && !work.mkdirs()) {
      throw new IllegalStateException("cannot create " + work);
    }
    MiniKdc kdc = new MiniKdc(conf, work);
    kdc.start();
    Kerberos k = new Kerberos(kdc, dir);
    // One createPrincipal call per keytab: each call writes its keytab anew.
    kdc.createPrincipal(k.serviceKeytab, "hdfs/localhost", "HTTP/localhost", "HTTP/127.0.0.1");
    kdc.createPrincipal(k.userKeytab, users);
    Files.writeString(k.clientConf.toPath(), String.join("\n",
        "[libdefaults]",
        "    default_realm = " + k.realm,
        "    dns_lookup_realm = false",
        "    dns_lookup_kdc = false",
        "    dns_canonicalize_hostname = false",
        "    rdns = false",
        "    udp_preference_limit = 1",
        "[realms]",
        "    " + k.realm + " = {",
        "        kdc = 127.0.0.1:" + kdc.getPort(),
        "    }",
        "[domain_realm]",
        "    localhost = " + k.realm,
        "    127.0.0.1 = " + k.realm,
        ""));
    return k;
  }

  /**
   * The cluster's security settings; also makes Hadoop's static security state use them. With
   * `sasl` the DataNodes want SASL on their transfer ports; without, block access tokens alone
   * (on unprivileged ports: Hadoop's test setting, where a production cluster uses privileged
   * ports).
   */
  void configure(Configuration conf, boolean sasl) {
    String svc = serviceKeytab.getAbsolutePath();
    conf.set("hadoop.security.authentication", "kerberos");
    conf.set("dfs.namenode.kerberos.principal", "hdfs/localhost@" + realm);
    conf.set("dfs.namenode.keytab.file", svc);
    conf.set("dfs.datanode.kerberos.principal", "hdfs/localhost@" + realm);
    conf.set("dfs.datanode.keytab.file", svc);
    conf.set("dfs.web.authentication.kerberos.principal", "HTTP/localhost@" + realm);
    conf.set("dfs.web.authentication.kerberos.keytab", svc);
    // WebHDFS's filter reads the hadoop.http.authentication.* settings, not dfs.web.*.
    conf.set("hadoop.http.authentication.type", "kerberos");
    conf.set("hadoop.http.authentication.kerberos.principal", "*");
    conf.set("hadoop.http.authentication.kerberos.keytab", svc);
    conf.setBoolean("dfs.block.access.token.enable", true);
    conf.setBoolean("ignore.secure.ports.for.testing", true);
    if (sasl) {
      // SASL on the DataNodes' transfer ports, as clusters on unprivileged ports run.
      conf.set("dfs.data.transfer.protection", "authentication");
    }
    UserGroupInformation.setConfiguration(conf);
    KerberosName.resetDefaultRealm();
  }

  /** What the ready line says of it. */
  String describe(String user) {
    return "kerberos " + realm + ": KRB5_CONFIG=" + clientConf + ", keytab " + userKeytab
        + " for " + user + "@" + realm;
  }

  void stop() {
    kdc.stop();
  }
}
