#include "embstore/common/address.h"

#include <gtest/gtest.h>

namespace embstore {
namespace {

std::string Error(std::string_view text, AddressUse use = AddressUse::kConnect) {
  auto a = ParseAddress(text, use, "server target");
  if (a.ok()) return "";
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument) << text;
  return a.status().message();
}

TEST(ParseAddress, AcceptsTheDocumentedForms) {
  for (const char* t : {"127.0.0.1:50051", "localhost:1", "my-host.example_1.com:65535",
                        "[::1]:8080", "[fe80::1%25eth0]:80", "unix:/tmp/s.sock",
                        "unix:///tmp/s.sock", "unix-abstract:embstore", "dns:///pool:50051",
                        "dns://8.8.8.8/pool.example.com:50051", "dns:pool", "dns:[::1]:443",
                        "ipv4:10.0.0.1:1,10.0.0.2:2", "ipv6:[::1]:50051,[::2]:50052"}) {
    auto a = ParseAddress(t, AddressUse::kConnect, "server target");
    EXPECT_TRUE(a.ok()) << t << ": " << a.status().ToString();
  }
  auto a = ParseAddress("[::1]:8080", AddressUse::kConnect, "server target");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, Address::Kind::kHostPort);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 8080);
}

// gRPC would wrap these ports (99999 -> 34463) and reach another server.
TEST(ParseAddress, RefusesPortsOutOfRangeInsteadOfWrappingThem) {
  EXPECT_NE(Error("127.0.0.1:99999").find("'127.0.0.1:99999' has port 99999, which is out of "
                                          "range: ports are 1 to 65535"),
            std::string::npos)
      << Error("127.0.0.1:99999");
  EXPECT_NE(Error("127.0.0.1:70000", AddressUse::kListen).find("ports are 0 to 65535"),
            std::string::npos);
  EXPECT_NE(Error("host:65536").find("out of range"), std::string::npos);
  EXPECT_NE(Error("host:18446744073709551617").find("out of range"), std::string::npos);
  EXPECT_NE(Error("host:0").find("ports are 1 to 65535"), std::string::npos);
  EXPECT_EQ(Error("0.0.0.0:0", AddressUse::kListen), "");
  EXPECT_NE(Error("dns:///pool:99999").find("out of range"), std::string::npos);
  EXPECT_NE(Error("ipv4:10.0.0.1:1,10.0.0.2:70000").find("port 70000"), std::string::npos);
}

TEST(ParseAddress, NamesWhatIsWrong) {
  EXPECT_NE(Error("host:80x").find("port '80x', which is not a decimal number"),
            std::string::npos);
  EXPECT_NE(Error("host:+80").find("not a decimal number"), std::string::npos);
  EXPECT_NE(Error("host:").find("has no port after ':'"), std::string::npos);
  EXPECT_NE(Error("host").find("has no port"), std::string::npos);
  EXPECT_NE(Error(":80").find("has no host"), std::string::npos);
  EXPECT_NE(Error("::1:80").find("in brackets"), std::string::npos);
  EXPECT_NE(Error("[::1:80").find("without ']'"), std::string::npos);
  EXPECT_NE(Error("http://host:80").find("is not an address"), std::string::npos);
  EXPECT_NE(Error("unix:").find("no socket path"), std::string::npos);
  EXPECT_NE(Error("ipv4:").find("lists no addresses"), std::string::npos);
  EXPECT_NE(Error("ipv4:1.2.3.4:5,").find("ends with ','"), std::string::npos);
  EXPECT_EQ(Error(""), "no server target given");
}

}  // namespace
}  // namespace embstore
