#include "chunker.h"

#include <algorithm>
#include <cstring>

namespace embstore::convert {

const char* NextLineStart(const char* p, const char* end) {
  while (p < end && *p != '\n' && *p != '\r') ++p;
  if (p == end) return end;
  if (*p == '\r' && p + 1 < end && p[1] == '\n') ++p;
  return p + 1;
}

Result<std::size_t> Chunker::Fill(std::vector<char>* buf, std::size_t from, std::size_t to) {
  std::size_t got = 0;
  while (from + got < to && !eof_) {
    EMBSTORE_ASSIGN_OR_RETURN(std::size_t r, in_->Read(buf->data() + from + got, to - from - got));
    if (r == 0) eof_ = true;
    got += r;
  }
  return got;
}

Result<bool> Chunker::Next(Chunk* out) {
  std::string_view m = in_->Mapped();
  if (!m.empty()) {
    if (offset_ >= m.size()) return false;
    const std::size_t start = offset_;
    std::size_t end = std::min<std::size_t>(start + NextSize(), m.size());
    if (end < m.size()) {
      const void* hit = nullptr;
      // First line break at or after the target size; memchr twice is fast and simple.
      const char* nl = static_cast<const char*>(std::memchr(m.data() + end, '\n', m.size() - end));
      const char* cr = static_cast<const char*>(std::memchr(m.data() + end, '\r',
                                                            (nl ? nl : m.data() + m.size()) -
                                                                (m.data() + end)));
      hit = cr != nullptr ? cr : nl;
      if (hit == nullptr) {
        end = m.size();
      } else {
        const char* p = static_cast<const char*>(hit);
        if (*p == '\r' && p + 1 < m.data() + m.size() && p[1] == '\n') ++p;
        end = static_cast<std::size_t>(p + 1 - m.data());
      }
    }
    out->buffer.reset();
    out->text = ChunkText{m.data() + start, m.data() + end, m.data(), m.data() + m.size()};
    offset_ = end;
    out->end_offset = end;
    return true;
  }

  if (eof_ && carry_.empty()) return false;
  std::size_t want = carry_.size() + NextSize();
  auto buf = std::make_shared<std::vector<char>>(kPadding + want + kPadding, '\0');
  std::memcpy(buf->data() + kPadding, carry_.data(), carry_.size());
  std::size_t len = carry_.size();
  carry_.clear();
  std::size_t cut = 0;
  for (;;) {
    EMBSTORE_ASSIGN_OR_RETURN(std::size_t n, Fill(buf.get(), kPadding + len, kPadding + want));
    len += n;
    const char* d = buf->data() + kPadding;
    std::size_t i = len;
    bool found = false;
    while (i > 0) {
      char c = d[i - 1];
      if (c == '\n' || (c == '\r' && (i < len || eof_))) {
        found = true;
        break;
      }
      --i;
    }
    if (found) {
      cut = i;
      break;
    }
    if (eof_) {
      cut = len;
      break;
    }
    want *= 2;  // a line longer than the buffer: read more
    buf->resize(kPadding + want + kPadding, '\0');
  }
  if (len == 0) return false;
  const char* d = buf->data() + kPadding;
  carry_.assign(d + cut, len - cut);
  out->text = ChunkText{d, d + cut, buf->data(), buf->data() + buf->size()};
  out->buffer = std::move(buf);
  offset_ += cut;
  out->end_offset = offset_;
  return true;
}

void Chunker::StartRawAfter(const Chunk& c, const char* from) {
  raw_hold_ = c.buffer;
  raw_p_ = from;
  raw_end_ = c.text.end;
  mapped_pos_ = c.end_offset;
}

Result<std::size_t> Chunker::ReadRaw(char* dst, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    if (raw_p_ < raw_end_) {
      std::size_t k = std::min<std::size_t>(n - done, static_cast<std::size_t>(raw_end_ - raw_p_));
      std::memcpy(dst + done, raw_p_, k);
      raw_p_ += k;
      done += k;
      continue;
    }
    std::string_view m = in_->Mapped();
    if (!m.empty()) {
      if (mapped_pos_ >= m.size()) break;
      std::size_t k = std::min<std::size_t>(n - done, m.size() - mapped_pos_);
      std::memcpy(dst + done, m.data() + mapped_pos_, k);
      mapped_pos_ += k;
      done += k;
      continue;
    }
    if (!carry_.empty()) {
      std::size_t k = std::min(n - done, carry_.size());
      std::memcpy(dst + done, carry_.data(), k);
      carry_.erase(0, k);
      done += k;
      continue;
    }
    if (eof_) break;
    EMBSTORE_ASSIGN_OR_RETURN(std::size_t r, in_->Read(dst + done, n - done));
    if (r == 0) eof_ = true;
    done += r;
  }
  return done;
}

}  // namespace embstore::convert
