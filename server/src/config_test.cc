#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "embstore/server/server.h"
#include "test_util.h"

namespace embstore::server {
namespace {

TEST(ConfigFile, ReadsEveryKnownKeyAndKeepsDefaultsForTheRest) {
  testing::TempDir dir;
  testkit::WriteFileOrDie(dir.File("tokens"), "# trainers\nalpha\n\n  beta  \n");
  testkit::WriteFileOrDie(dir.File("c.json"), R"({
    // comments are allowed
    "store": "/data", "listen": ["127.0.0.1:1", "unix:/tmp/s"], "poll_interval_ms": 50,
    "stream_idle_timeout_ms": 5000,
    "limits": {"max_concurrent_streams": 3, "max_lookup_batch": 9,
               "max_transport_memory_bytes": 67108864},
    "chunks": {"default_chunk_bytes": 65536},
    "keepalive": {"time_ms": 1000, "permit_without_calls": false},
    "tls": {"cert_file": "c.pem", "key_file": "k.pem"},
    "auth": {"token_file": ")" + dir.File("tokens") +
                                                  R"("},
    "log_level": "warn", "log_repeat_interval_ms": 60000})");
  ServerConfig c;
  ASSERT_TRUE(LoadConfigFile(dir.File("c.json"), &c).ok());
  EXPECT_EQ(c.store_dir, "/data");
  EXPECT_EQ(c.listen, (std::vector<std::string>{"127.0.0.1:1", "unix:/tmp/s"}));
  EXPECT_EQ(c.poll_interval.count(), 50);
  EXPECT_EQ(c.stream_idle_timeout.count(), 5000);
  EXPECT_EQ(c.shutdown_grace.count(), ServerConfig().shutdown_grace.count());
  EXPECT_EQ(c.max_concurrent_streams, 3u);
  EXPECT_EQ(c.service.max_lookup_batch, 9u);
  EXPECT_EQ(c.max_transport_memory_bytes, 64u << 20);
  EXPECT_EQ(c.max_receive_message_bytes, ServerConfig().max_receive_message_bytes);
  EXPECT_EQ(c.service.default_chunk_bytes, 65536u);
  EXPECT_EQ(c.service.max_chunk_bytes, ServiceOptions().max_chunk_bytes);
  EXPECT_EQ(c.keepalive.time_ms, 1000);
  EXPECT_FALSE(c.keepalive.permit_without_calls);
  EXPECT_EQ(c.tls.cert_file, "c.pem");
  EXPECT_EQ(c.auth_tokens, (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_EQ(c.log_repeat_interval.count(), 60000);
}

TEST(ConfigFile, RejectsUnknownKeysWrongTypesAndBadJsonNamingTheFile) {
  testing::TempDir dir;
  struct Case {
    const char* json;
    const char* mention;
  };
  for (const Case& k :
       {Case{R"({"listen": "x"})", "'listen' must be an array of strings"},
        Case{R"({"limits": {"max_streams": 1}})", "unknown key 'limits.max_streams'"},
        Case{R"({"limits": {"max_lookup_batch": -1}})", "non-negative"},
        Case{R"({"limits": {"max_lookup_batch": 0}})",
             "'limits.max_lookup_batch' must be a positive"},
        Case{R"({"limits": {"max_concurrent_streams": 5000000000}})", "smaller integer"},
        Case{R"({"keepalive": {"min_client_ping_ms": -5}})", "non-negative"},
        Case{R"({"keepalive": 3})", "'keepalive' must be an object"},
        Case{R"({"auth": {"token_file": 7}})", "'auth.token_file' must be a string"},
        Case{R"({"verify_on_load": 1})", "true or false"},
        Case{R"({"store": )", "not valid JSON"}}) {
    testkit::WriteFileOrDie(dir.File("bad.json"), k.json);
    ServerConfig c;
    Status st = LoadConfigFile(dir.File("bad.json"), &c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << k.json;
    EXPECT_NE(st.message().find(k.mention), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("bad.json"), std::string::npos) << st.message();
  }
  ServerConfig c;
  EXPECT_EQ(LoadConfigFile(dir.File("absent.json"), &c).code(), StatusCode::kNotFound);
}

TEST(ConfigFile, TheShippedExampleParses) {
  ServerConfig c;
  Status st = LoadConfigFile(EMBSTORE_SOURCE_DIR "/deploy/serve.example.json", &c);
  // Everything parses; only the example's token file does not exist on this machine.
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("/etc/embstore/tokens"), std::string::npos) << st.message();
  EXPECT_EQ(c.listen.size(), 2u);
  EXPECT_EQ(c.tls.client_ca_file, "/etc/embstore/tls/clients-ca.pem");
}

// The one table of settings is what docs/SERVING.md documents: each key on a row of its
// "Configuration file" table, with the flag that sets it and its default.
TEST(ConfigOptions, DocsListEveryKeyWithItsFlagAndDefault) {
  std::ifstream in(EMBSTORE_SOURCE_DIR "/docs/SERVING.md");
  ASSERT_TRUE(in.good());
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("| `")) rows.push_back(line);
  }
  const ServerConfig defaults;
  std::set<std::string> flags;
  for (const ConfigOption& o : ConfigOptions()) {
    const std::string key = "`" + std::string(o.key) + "`";
    auto row = std::find_if(rows.begin(), rows.end(), [&](const std::string& r) {
      return r.substr(0, r.find(" | ", 2)).find(key) != std::string::npos;
    });
    ASSERT_NE(row, rows.end()) << o.key << " is not in docs/SERVING.md";
    const std::string cells = row->substr(row->find(" | ", 2));
    if (!o.flag.empty()) {
      EXPECT_NE(cells.find("`" + std::string(o.flag) + "`"), std::string::npos) << *row;
      EXPECT_TRUE(flags.insert(std::string(o.flag)).second) << o.flag << " twice";
    } else {
      EXPECT_EQ(cells.find("`--"), std::string::npos) << o.key << " has no flag: " << *row;
    }
    const std::string value = FormatOptionValue(o, defaults);
    if (!value.empty()) {
      EXPECT_NE(cells.find(" " + value), std::string::npos) << *row;
    }
  }
}

TEST(TokenFile, EmptyFileOrTokenWithSpacesIsAnError) {
  testing::TempDir dir;
  std::vector<std::string> tokens;
  testkit::WriteFileOrDie(dir.File("t"), "# nothing\n\n");
  EXPECT_EQ(LoadTokenFile(dir.File("t"), &tokens).code(), StatusCode::kInvalidArgument);
  testkit::WriteFileOrDie(dir.File("t"), "ok\nnot ok\n");
  Status st = LoadTokenFile(dir.File("t"), &tokens);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("line 2"), std::string::npos);
}

}  // namespace
}  // namespace embstore::server
