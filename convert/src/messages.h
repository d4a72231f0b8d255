// Text helpers for the converter's messages and format sniffing (private to convert/).
#ifndef EMBSTORE_CONVERT_SRC_MESSAGES_H_
#define EMBSTORE_CONVERT_SRC_MESSAGES_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace embstore::convert {

// Quotes text for a message: printable ASCII and valid UTF-8 as is, quotes and backslashes
// escaped, Unicode spaces and invisible characters as \uXXXX, every other byte as \xNN (so a
// message is always valid UTF-8); cut after about 60 bytes, never inside a character.
std::string Quote(std::string_view s);

// Whitespace that np.loadtxt (and Python's str.split) separates fields on, but that is neither a
// space nor a tab: \v, \f, the ASCII separators 0x1c-0x1f, and Unicode spaces in UTF-8. Returns
// its length in bytes at s[i] (0 if none) and sets *name to its name.
std::size_t ExoticSpaceAt(std::string_view s, std::size_t i, const char** name);

// Characters that print as nothing (U+FEFF BYTE ORDER MARK, zero-width spaces and joiners), in
// UTF-8: their length at s[i] (0 if none), and *name.
std::size_t InvisibleAt(std::string_view s, std::size_t i, const char** name);

// "; column C holds NAME, which np.loadtxt treats as a field separator but ..." when `line` holds
// such whitespace (or an invisible character: InvisibleAt), else empty. Added to errors about
// that line.
std::string ExoticSpaceNote(std::string_view line);

inline bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// The text of the line that starts at p (without its line break).
inline std::string_view LineAt(const char* p, const char* end) {
  const char* q = p;
  while (q < end && *q != '\n' && *q != '\r') ++q;
  return {p, static_cast<std::size_t>(q - p)};
}

}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_SRC_MESSAGES_H_
