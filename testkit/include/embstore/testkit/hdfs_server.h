// A real HDFS for tests: a MiniDFSCluster (a NameNode and two DataNodes, replication 2, from
// Hadoop's own jars) started through scripts/hdfs-server.sh on free 127.0.0.1 ports, with its data
// in a TempDir and WebHDFS on port(), so "hdfs://127.0.0.1:PORT/..." addresses it.
//
// The cluster is built by `scripts/hdfs-server.sh --build` (test.sh does it before ctest); when it
// is missing, ok() is false and why() says so, and tests skip, unless EMBSTORE_REQUIRE_HDFS=1
// (set by test.sh and CI), which makes them fail instead.
#ifndef EMBSTORE_TESTKIT_HDFS_SERVER_H_
#define EMBSTORE_TESTKIT_HDFS_SERVER_H_

#include <memory>
#include <string>

#include "embstore/testkit/child_process.h"
#include "embstore/testkit/temp_dir.h"

namespace embstore::testkit {

class HdfsServer {
 public:
  HdfsServer();  // starts it and waits until the NameNode and both DataNodes are up
  ~HdfsServer();
  HdfsServer(const HdfsServer&) = delete;
  HdfsServer& operator=(const HdfsServer&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  int port() const { return port_; }  // the NameNode's HTTP (WebHDFS) port
  std::string url() const;            // hdfs://127.0.0.1:PORT

  // DataNode `index` (0 or 1) stopped (its blocks kept) and started again, through the script's
  // control port (PORT+1).
  bool StopDataNode(int index);
  bool RestartDataNode(int index);

 private:
  bool StartOn(int port);
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<ChildProcess> child_;
  std::string why_;
  int port_ = 0;
  bool ok_ = false;
};

// EMBSTORE_REQUIRE_HDFS=1: a missing cluster is a failure, not a skip.
bool HdfsRequired();

}  // namespace embstore::testkit

#endif  // EMBSTORE_TESTKIT_HDFS_SERVER_H_
