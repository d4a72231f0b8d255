#include "messages.h"

#include <cstdint>
#include <cstdio>

#include "embstore/convert/parse_kernels.h"

namespace embstore::convert {
namespace {
constexpr std::size_t kSnippetBytes = 60;

// A character of interest in messages: its UTF-8 bytes (or control byte) and its name.
struct NamedChar {
  const char* bytes;
  const char* name;
};

// The length of the entry of `table` found at s[i] (0 if none), and its name.
template <std::size_t N>
std::size_t MatchAt(const NamedChar (&table)[N], std::string_view s, std::size_t i,
                    const char** name) {
  for (const NamedChar& c : table) {
    std::string_view b(c.bytes);
    if (s.substr(i, b.size()) == b) {
      *name = c.name;
      return b.size();
    }
  }
  return 0;
}

}  // namespace

std::size_t ExoticSpaceAt(std::string_view s, std::size_t i, const char** name) {
  static const NamedChar kSpaces[] = {
      {"\v", "U+000B LINE TABULATION (\\v)"},   {"\f", "U+000C FORM FEED (\\f)"},
      {"\x1c", "U+001C FILE SEPARATOR"},        {"\x1d", "U+001D GROUP SEPARATOR"},
      {"\x1e", "U+001E RECORD SEPARATOR"},      {"\x1f", "U+001F UNIT SEPARATOR"},
      {"\xc2\x85", "U+0085 NEXT LINE"},         {"\xc2\xa0", "U+00A0 NO-BREAK SPACE"},
      {"\xe1\x9a\x80", "U+1680 OGHAM SPACE MARK"}, {"\xe2\x80\xa8", "U+2028 LINE SEPARATOR"},
      {"\xe2\x80\xa9", "U+2029 PARAGRAPH SEPARATOR"},
      {"\xe2\x80\xaf", "U+202F NARROW NO-BREAK SPACE"},
      {"\xe2\x81\x9f", "U+205F MEDIUM MATHEMATICAL SPACE"},
      {"\xe3\x80\x80", "U+3000 IDEOGRAPHIC SPACE"},
  };
  if (std::size_t n = MatchAt(kSpaces, s, i, name)) return n;
  // U+2000 .. U+200A: EN QUAD .. HAIR SPACE.
  if (i + 3 <= s.size() && s[i] == '\xe2' && s[i + 1] == '\x80' &&
      static_cast<unsigned char>(s[i + 2]) >= 0x80 && static_cast<unsigned char>(s[i + 2]) <= 0x8a) {
    *name = "a Unicode space (U+2000 to U+200A)";
    return 3;
  }
  return 0;
}

std::size_t InvisibleAt(std::string_view s, std::size_t i, const char** name) {
  static const NamedChar kInvisible[] = {
      {"\xef\xbb\xbf", "U+FEFF BYTE ORDER MARK"},
      {"\xe2\x80\x8b", "U+200B ZERO WIDTH SPACE"},
      {"\xe2\x80\x8c", "U+200C ZERO WIDTH NON-JOINER"},
      {"\xe2\x80\x8d", "U+200D ZERO WIDTH JOINER"},
      {"\xe2\x81\xa0", "U+2060 WORD JOINER"},
  };
  return MatchAt(kInvisible, s, i, name);
}

std::string ExoticSpaceNote(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char* name = nullptr;
    if (ExoticSpaceAt(line, i, &name) != 0) {
      return "; column " + std::to_string(i + 1) + " holds " + name +
             ", which np.loadtxt treats as a field separator but embstore convert does not "
             "(fields are separated by spaces and tabs, or the `delimiter`): replace it with a space";
    }
    if (InvisibleAt(line, i, &name) != 0) {
      return "; column " + std::to_string(i + 1) + " holds " + name +
             ", an invisible character (a byte order mark is skipped only at the very start of "
             "the input): remove it";
    }
  }
  return "";
}

std::string Quote(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "'";
  std::size_t i = 0;
  while (i < s.size() && i < kSnippetBytes) {
    auto c = static_cast<unsigned char>(s[i]);
    const char* space_name = nullptr;
    std::size_t n = ExoticSpaceAt(s, i, &space_name);
    if (n <= 1) n = InvisibleAt(s, i, &space_name);
    if (n > 1) {
      // A Unicode space prints like a space and an invisible character not at all; show its
      // code point instead.
      std::uint32_t cp = n == 2 ? ((c & 0x1f) << 6) | (s[i + 1] & 0x3f)
                                : ((c & 0x0f) << 12) | ((s[i + 1] & 0x3f) << 6) | (s[i + 2] & 0x3f);
      char buf[12];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
      i += n;
      continue;
    }
    if (c >= 0x80) {
      std::size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      std::size_t bad = 0;
      if (i + len <= s.size() && ValidUtf8(s.substr(i, len), &bad)) {
        out.append(s.substr(i, len));
        i += len;
        continue;
      }
    }
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    ++i;
  }
  out += "'";
  if (i < s.size()) out += "...";
  return out;
}

}  // namespace embstore::convert
