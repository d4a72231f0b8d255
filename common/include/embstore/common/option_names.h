// How library messages name options, and how a front end puts them in its own terms.
//
// A library error that tells its caller which option to set names it by its API name, in
// backquotes: "use `overwrite` to replace it", "(`tls.cert_file` and `tls.key_file`)". It never
// speaks of a front end's flags. Each front end maps the names to what its users type: the CLI
// to flags (--force, --tls-cert), the Python binding to keyword arguments (tls_cert=).
#ifndef EMBSTORE_COMMON_OPTION_NAMES_H_
#define EMBSTORE_COMMON_OPTION_NAMES_H_

#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace embstore {

// (API name, what a front end calls it).
using OptionName = std::pair<std::string_view, std::string_view>;

// `message` with each backquoted name found in `names` replaced, backquotes and all, by its
// front end's term. Other backquoted text stays as it is.
inline std::string InFrontEndTerms(std::string_view message, std::span<const OptionName> names) {
  std::string out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t open = message.find('`', at);
    const std::size_t close = open == std::string_view::npos ? open : message.find('`', open + 1);
    if (close == std::string_view::npos) break;
    const std::string_view name = message.substr(open + 1, close - open - 1);
    out.append(message.substr(at, open - at));
    std::string_view term = message.substr(open, close + 1 - open);
    for (const auto& [api, front] : names) {
      if (api == name) term = front;
    }
    out.append(term);
    at = close + 1;
  }
  out.append(message.substr(at));
  return out;
}

}  // namespace embstore

#endif  // EMBSTORE_COMMON_OPTION_NAMES_H_
