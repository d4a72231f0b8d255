#include "embstore/common/address.h"

#include <cstdint>

namespace embstore {
namespace {

constexpr std::string_view kForms =
    "expected HOST:PORT, [IPV6]:PORT, unix:PATH, unix-abstract:NAME or dns:HOST[:PORT]";

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '-' || c == '_';
}

// Inside brackets: hex digits, ':' and '.', and a zone after '%' ("fe80::1%25eth0").
bool IsV6Char(char c) { return IsHostChar(c) || c == ':' || c == '%'; }

class Checker {
 public:
  Checker(std::string_view text, AddressUse use, std::string_view what)
      : text_(text), use_(use), what_(what) {}

  Status Bad(std::string_view why) const {
    return Status::InvalidArgument(std::string(what_) + " '" + std::string(text_) + "' " +
                                   std::string(why));
  }

  // "PORT": decimal digits, in range for the use.
  Result<int> Port(std::string_view p) const {
    if (p.empty()) return Bad("has no port after ':'");
    std::uint32_t v = 0;
    for (char c : p) {
      if (c < '0' || c > '9') {
        return Bad("has port '" + std::string(p) + "', which is not a decimal number");
      }
      if (v <= 65535) v = v * 10 + static_cast<std::uint32_t>(c - '0');
    }
    const std::uint32_t low = use_ == AddressUse::kListen ? 0 : 1;
    if (v < low || v > 65535) {
      return Bad("has port " + std::string(p) + ", which is out of range: ports are " +
                 std::to_string(low) + " to 65535" +
                 (use_ == AddressUse::kListen ? " (0 picks a free one)" : ""));
    }
    return static_cast<int>(v);
  }

  // "HOST:PORT" or "[V6]:PORT" (the port optional when `port_optional`).
  Result<Address> HostPort(std::string_view s, bool port_optional) const {
    Address a;
    std::string_view host;
    std::string_view rest;
    if (!s.empty() && s.front() == '[') {
      const std::size_t close = s.find(']');
      if (close == std::string_view::npos) return Bad("has '[' without ']'");
      host = s.substr(1, close - 1);
      if (host.empty()) return Bad("has an empty IPv6 address in brackets");
      for (char c : host) {
        if (!IsV6Char(c)) return Bad("has an IPv6 address with '" + std::string(1, c) + "' in it");
      }
      rest = s.substr(close + 1);
      if (!rest.empty() && rest.front() != ':') return Bad("has text after ']' that is not :PORT");
    } else {
      const std::size_t colon = s.rfind(':');
      host = colon == std::string_view::npos ? s : s.substr(0, colon);
      rest = colon == std::string_view::npos ? std::string_view() : s.substr(colon);
      if (host.find(':') != std::string_view::npos) {
        return Bad("is not an address: an IPv6 address goes in brackets ([::1]:PORT)");
      }
      if (host.empty()) return Bad("has no host before ':PORT'");
      for (char c : host) {
        if (!IsHostChar(c)) return Bad("is not an address (" + std::string(kForms) + ")");
      }
    }
    a.host = std::string(host);
    if (rest.empty()) {
      if (!port_optional) return Bad("has no port (" + std::string(kForms) + ")");
      return a;
    }
    EMBSTORE_ASSIGN_OR_RETURN(a.port, Port(rest.substr(1)));
    return a;
  }

  Result<Address> Parse() const {
    auto starts = [&](std::string_view p) { return text_.substr(0, p.size()) == p; };
    if (text_.empty()) return Status::InvalidArgument("no " + std::string(what_) + " given");
    Address a;
    if (starts("unix:")) {
      if (text_.size() == 5) return Bad("names no socket path after 'unix:'");
      a.kind = Address::Kind::kUnix;
      return a;
    }
    if (starts("unix-abstract:")) {
      if (text_.size() == 14) return Bad("names no socket after 'unix-abstract:'");
      a.kind = Address::Kind::kUnixAbstract;
      return a;
    }
    if (starts("dns:")) {
      std::string_view rest = text_.substr(4);
      if (rest.substr(0, 2) == "//") {
        const std::size_t slash = rest.find('/', 2);
        if (slash == std::string_view::npos) return Bad("has no '/' after the DNS authority");
        rest = rest.substr(slash + 1);
      }
      if (rest.empty()) return Bad("names no host after 'dns:'");
      EMBSTORE_ASSIGN_OR_RETURN(a, HostPort(rest, /*port_optional=*/true));
      a.kind = Address::Kind::kDns;
      return a;
    }
    if (starts("ipv4:") || starts("ipv6:")) {
      std::string_view rest = text_.substr(5);
      if (rest.empty()) return Bad("lists no addresses");
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        EMBSTORE_RETURN_NOT_OK(HostPort(rest.substr(0, comma), false).status());
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
        if (rest.empty()) return Bad("ends with ','");
      }
      a.kind = Address::Kind::kIpList;
      return a;
    }
    EMBSTORE_ASSIGN_OR_RETURN(a, HostPort(text_, /*port_optional=*/false));
    a.kind = Address::Kind::kHostPort;
    return a;
  }

 private:
  std::string_view text_;
  AddressUse use_;
  std::string_view what_;
};

}  // namespace

Result<Address> ParseAddress(std::string_view text, AddressUse use, std::string_view what) {
  return Checker(text, use, what).Parse();
}

}  // namespace embstore
