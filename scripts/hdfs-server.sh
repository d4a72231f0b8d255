#!/usr/bin/env bash
# Runs a real HDFS in the foreground for tests: a Hadoop MiniDFSCluster (one NameNode, two
# DataNodes, replication 2, permissions checked) with its data under DIR and WebHDFS on
# http://127.0.0.1:PORT/webhdfs/v1/ (Apache Hadoop 3.4.1, Apache-2.0).
#
# Usage: scripts/hdfs-server.sh [--kerberos [--sasl]] DIR PORT
#        scripts/hdfs-server.sh --build    builds the server if needed, prints its path, exits
#        scripts/hdfs-server.sh --where    prints the server's path; exit status 3 when not built
#   DIR    the data: formatted when DIR is new or empty, reused with its files when an earlier
#          run made it (a .hdfs-server file marks it); any other non-empty directory is refused.
#   PORT   the NameNode's HTTP port (WebHDFS). PORT+1 must be free too (the control endpoint).
#          The NameNode RPC port and the DataNodes' ports are free ports picked at each start
#          (the ready line names the RPC port); WebHDFS redirects (307) name a DataNode as
#          127.0.0.1:its-http-port.
#   --kerberos  a kerberized cluster: a MiniKdc (realm EXAMPLE.COM) under DIR/kdc, WebHDFS
#          behind SPNEGO, block access tokens and delegation tokens on. The HDFS superuser is
#          then hdfs; the user running this script owns "/". DIR/kdc/krb5.conf (for
#          KRB5_CONFIG) and DIR/kdc/user.keytab (principals USER and embstore-stranger) are
#          for clients: KRB5_CONFIG=DIR/kdc/krb5.conf kinit -kt DIR/kdc/user.keytab USER. The
#          DataNodes run on unprivileged ports (Hadoop's test setting) and take block access
#          tokens; with --sasl they also want SASL on their transfer ports
#          (dfs.data.transfer.protection=authentication).
#   HDFS_SERVER_LOG_LEVEL   Hadoop's log level, on stderr (default WARN, minus known noise)
#   HDFS_SERVER_JAVA_OPTS   more JVM options
#
# Once it serves, it prints one line to stdout: "hdfs-server: ready on 127.0.0.1:PORT
# (namenode rpc 127.0.0.1:N, datanodes 2, control 127.0.0.1:PORT+1[, kerberos ...])". SIGTERM, or SIGINT where
# it was not ignored at start (it is for `cmd &` in a script), stops it cleanly: exit status 0.
# The user running it is the HDFS superuser (user.name=$(whoami)); blocks may be as small as
# 1024 bytes. A stopped DataNode turns stale for the NameNode after 3 s (OPEN then redirects to
# the other replica) and dead after about 20 s. A DataNode serves WebHDFS reads through its
# own HDFS client, which fails over to the other replica by itself: only stopping the DataNode
# that a redirect named breaks that HTTP response (mid-body, for a large enough read).
#
# Control endpoint, http://127.0.0.1:PORT+1, JSON replies, errors as {"error":"..."}:
#   GET  /datanodes                 [{"index":0,"alive":true,"http":"127.0.0.1:P","xfer":"..",
#                                     "ipc":"..","uuid":"..","namenode":"live|stale|dead"},...]
#   POST /datanode/stop?index=N     stops DataNode N (0 or 1), keeping its blocks; 409 if stopped.
#                                   Until it turns stale (3 s) OPEN may still redirect to it.
#   POST /datanode/stop?index=N&dead=1  also marks it dead for the NameNode at once
#   POST /datanode/restart?index=N  (re)starts it on the same ports; replies once the NameNode
#                                   has its block report
#
# The first --build downloads Hadoop's jars with Maven (about 120 MB, under a minute on a fast
# link) and builds scripts/hdfs-server/ into ${EMBSTORE_CACHE:-~/.cache/embstore}/hdfs-server/,
# outside the checkout, keyed by the Hadoop version and a hash of those sources; later runs
# reuse it. Needs java, javac (17 or newer) and mvn: on Debian 12, apt-get install
# openjdk-17-jdk-headless maven. With SSL_CERT_FILE set, Maven trusts the CAs of that bundle
# (a trust store made from it, scripts/hdfs-server/PemTrustStore.java), as curl and pip do.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

HADOOP_VERSION=3.4.1
SRC="$ROOT/scripts/hdfs-server"
CACHE="${EMBSTORE_CACHE:-${HOME:?}/.cache/embstore}/hdfs-server"
M2="$CACHE/m2"        # Maven's local repository: nothing comes from or goes to ~/.m2

log() { echo "hdfs-server: $*" >&2; }
die() { log "$*"; exit 1; }

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  usage
  exit 0
fi
MODE=run
kerberos=()
if [[ ${1:-} == --kerberos ]]; then
  kerberos=(--kerberos)
  shift
  if [[ ${1:-} == --sasl ]]; then
    kerberos+=(--sasl)
    shift
  fi
fi
if [[ ${1:-} == --where && $# -eq 1 ]]; then
  MODE=where
elif [[ ${1:-} == --build && $# -eq 1 ]]; then
  MODE=build
elif [[ $# -ne 2 ]]; then
  usage >&2
  exit 2
fi
dir="${1:-}"
port="${2:-0}"
if [[ $MODE == run ]] && ! { [[ $port =~ ^[0-9]+$ ]] && ((port >= 1024 && port <= 65534)); }; then
  die "PORT must be a number from 1024 to 65534 (got '$port'): PORT+1 is used too"
fi

JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
command -v "$JAVA" >/dev/null ||
  die "no java on PATH: apt-get install openjdk-17-jdk-headless maven (Java 17 or newer)"

# The build is keyed by the Hadoop version and the sources, so editing them rebuilds.
src_hash="$(cd "$SRC" && find pom.xml src -type f | LC_ALL=C sort | xargs cat | sha256sum |
  cut -c1-12)"
SERVER="$CACHE/hadoop-$HADOOP_VERSION-$src_hash"

# built: whether SERVER holds the jar and every jar its classpath names.
built() {
  [[ -f $SERVER/hdfs-server.jar && -s $SERVER/classpath.txt ]] || return 1
  local jars jar
  IFS=: read -r -a jars <"$SERVER/classpath.txt"
  for jar in "${jars[@]}"; do
    [[ -f $jar ]] || return 1
  done
}

build_server() {
  command -v mvn >/dev/null || die "no mvn on PATH: apt-get install maven openjdk-17-jdk-headless"
  command -v "${JAVA_HOME:+$JAVA_HOME/bin/}javac" >/dev/null ||
    die "no javac (a JDK, not only a JRE): apt-get install openjdk-17-jdk-headless"
  mkdir -p "$CACHE" || die "cannot create $CACHE"
  local tmp
  tmp="$(mktemp -d "$CACHE/.build.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  trap 'exit 130' INT TERM
  cp -r "$SRC/pom.xml" "$SRC/src" "$tmp/"
  log "building the HDFS test server (Hadoop $HADOOP_VERSION) into $SERVER"
  [[ -d $M2 ]] || log "the first build downloads about 120 MB of jars into $M2"
  # Maven trusts Java's own CA store. Where the environment names a CA bundle of its own
  # (SSL_CERT_FILE, as curl, pip and Go read it: a proxy's CA, a company's), Maven gets a trust
  # store made from that bundle instead, kept in the cache under the bundle's hash.
  local maven_opts="${MAVEN_OPTS:-}"
  if [[ -n ${SSL_CERT_FILE:-} && -s $SSL_CERT_FILE ]]; then
    local store
    store="$CACHE/truststore-$(sha256sum <"$SSL_CERT_FILE" | cut -c1-12).p12"
    if [[ ! -s $store ]]; then
      "$JAVA" "$SRC/PemTrustStore.java" "$SSL_CERT_FILE" "$store.tmp" ||
        die "could not make a Java trust store of SSL_CERT_FILE=$SSL_CERT_FILE"
      mv "$store.tmp" "$store"
    fi
    maven_opts+=" -Djavax.net.ssl.trustStore=$store -Djavax.net.ssl.trustStoreType=PKCS12"
    maven_opts+=" -Djavax.net.ssl.trustStorePassword=changeit"
  fi
  # Debian's Maven 3.8.7 writes colour codes even in batch mode: they are dropped.
  (cd "$tmp" && MAVEN_OPTS="$maven_opts" mvn -B -q -Dmaven.repo.local="$M2" \
    -Dhadoop.version="$HADOOP_VERSION" \
    -Dclasspath.file="$tmp/out/classpath.txt" package </dev/null) 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >&2 || die "the Maven build failed"
  mv "$tmp/target/hdfs-server.jar" "$tmp/out/"
  rm -rf "$SERVER"                       # a stale one whose jars were removed
  mv -T "$tmp/out" "$SERVER" 2>/dev/null || built || die "could not move the build to $SERVER"
  rm -rf "$tmp"
  trap - EXIT INT TERM
  built || die "the build in $SERVER names jars that are missing"
}

if [[ $MODE == where ]]; then
  built || { log "not built yet: $SERVER (scripts/hdfs-server.sh --build)"; exit 3; }
  echo "$SERVER"
  exit 0
fi
built || build_server
if [[ $MODE == build ]]; then
  echo "$SERVER"
  exit 0
fi

mkdir -p "$dir" 2>/dev/null || die "cannot create the data directory $dir"
dir="$(cd "$dir" && pwd)"
log "WebHDFS on http://127.0.0.1:$port/webhdfs/v1/, control on http://127.0.0.1:$((port + 1))," \
  "data in $dir"
# The JVM resolves names from a hosts file of its own: everything here is on 127.0.0.1, and
# Hadoop looks this host's name up at start (the _HOST of principals, metrics), which fails
# where the machine cannot resolve its own name (a container, a minimal root without
# /etc/hosts).
hosts="$CACHE/hosts-$(hostname)"
if [[ ! -s $hosts ]]; then
  printf '127.0.0.1 localhost %s\n' "$(hostname)" >"$hosts.tmp" && mv "$hosts.tmp" "$hosts" ||
    die "cannot write $hosts"
fi
# C1 only: starts about a third faster and is no slower at test-sized transfers. JAXB (WebHDFS's
# JSON) needs java.lang opened on JDK 17.
# shellcheck disable=SC2086
exec "$JAVA" -Xmx1g -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
  -Djdk.net.hosts.file="$hosts" --add-opens java.base/java.lang=ALL-UNNAMED \
  ${HDFS_SERVER_JAVA_OPTS:-} \
  -cp "$SERVER/hdfs-server.jar:$(cat "$SERVER/classpath.txt")" embstore.HdfsServer \
  "${kerberos[@]}" "$dir" "$port"
