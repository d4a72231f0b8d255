import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.Collection;

/**
 * Writes a PKCS12 trust store holding every certificate of a PEM bundle, for Maven (and any JVM)
 * on a machine whose TLS trust is a CA bundle file rather than Java's own store: what
 * SSL_CERT_FILE names for curl, pip and Go. Run by scripts/hdfs-server.sh with the JDK's source
 * launcher: java PemTrustStore.java BUNDLE.pem OUT.p12 (password "changeit", Java's usual).
 */
public final class PemTrustStore {
  private PemTrustStore() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: java PemTrustStore.java BUNDLE.pem OUT.p12");
      System.exit(2);
    }
    Collection<? extends Certificate> certs;
    try (InputStream in = new FileInputStream(args[0])) {
      certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
    }
    if (certs.isEmpty()) {
      System.err.println(args[0] + " holds no certificates");
      System.exit(1);
    }
    KeyStore store = KeyStore.getInstance("PKCS12");
    store.load(null, null);
    int i = 0;
    for (Certificate c : certs) {
      String name = c instanceof X509Certificate x
          ? x.getSubjectX500Principal().getName() : "certificate";
      store.setCertificateEntry(i++ + " " + name, c);
    }
    try (OutputStream out = new FileOutputStream(args[1])) {
      store.store(out, "changeit".toCharArray());
    }
  }
}
