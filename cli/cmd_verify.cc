// `embstore verify LOCATION [--table NAME]`: reads every row of a table and checks each checksum
// block, then the keys. LOCATION is anything client::OpenSource takes: a file is read with
// pread, an s3:// object fetched block by block, a server's rows streamed (the server checks its
// blocks and every chunk is checked against the checksum it carries). Names each bad block.
#include <cstdio>
#include <vector>

#include "client_flags.h"
#include "command.h"
#include "embstore/store/checksum.h"
#include "embstore/client/row_source.h"
#include "embstore/store/table.h"
#include "progress.h"

namespace embstore::cli {
namespace {

struct VerifyArgs {
  ClientFlags client;
  std::string location;
  std::string table;
  int max_report = 20;
};

int Verify(const VerifyArgs& a) {
  auto opened = OpenTable(a.location, a.table, a.client);
  if (!opened.ok()) return ReportError("verify", opened.status());
  client::RowSource& src = **opened;
  const client::TableDesc& d = src.desc();
  Progress progress("verify " + a.location);
  const std::uint64_t total = d.rows * d.row_bytes;
  // Windows of whole blocks, about 64 MiB, read and checked in parallel; a window that fails is
  // read again block by block, to name every bad block in it.
  const std::uint64_t br = d.block_rows > 0 ? d.block_rows : 4096;
  const std::uint64_t blocks =
      d.num_blocks > 0 ? d.num_blocks : (d.rows + br - 1) / br;
  const std::uint64_t per_window =
      std::max<std::uint64_t>(1, (64u << 20) / std::max<std::uint64_t>(1, br * d.row_bytes));
  client::ReadOptions read;  // verify is on
  std::vector<std::byte> buf;
  auto rows_of = [&](std::uint64_t b0, std::uint64_t b1) {
    return std::pair<std::uint64_t, std::uint64_t>(b0 * br, std::min(d.rows, b1 * br));
  };
  std::uint64_t bad = 0;
  // Stored row hashes (format version 3) are checked against the rows that passed their blocks.
  const store::Table* stored = src.local_table();
  if (stored != nullptr && !stored->has_row_hashes()) stored = nullptr;
  std::uint64_t bad_hashes = 0;
  for (std::uint64_t b = 0; b < blocks; b += per_window) {
    const std::uint64_t e = std::min(blocks, b + per_window);
    auto [r0, r1] = rows_of(b, e);
    buf.resize((r1 - r0) * d.row_bytes);
    Status st = src.CopyRows(r0, r1, buf, read).status();
    if (!st.ok() && st.code() != StatusCode::kCorruption) {
      progress.Finish();
      return ReportError("verify", st);
    }
    for (std::uint64_t k = b; !st.ok() && k < e; ++k) {
      auto [k0, k1] = rows_of(k, k + 1);
      Status one = src.CopyRows(k0, k1, std::span(buf).first((k1 - k0) * d.row_bytes), read)
                       .status();
      if (one.ok()) continue;
      if (one.code() != StatusCode::kCorruption) {
        progress.Finish();
        return ReportError("verify", one);
      }
      progress.Finish();
      if (bad < static_cast<std::uint64_t>(a.max_report)) {
        std::fprintf(stderr, "embstore verify: %s\n", one.message().c_str());
      }
      ++bad;
    }
    for (std::uint64_t r = r0; st.ok() && stored != nullptr && r < r1; ++r) {
      const auto row = std::span<const std::byte>(buf).subspan((r - r0) * d.row_bytes, d.row_bytes);
      if (store::Checksum64(row) == stored->StoredRowHash(r)) continue;
      progress.Finish();
      if (bad_hashes < static_cast<std::uint64_t>(a.max_report)) {
        std::fprintf(stderr,
                     "embstore verify: '%s': the stored hash of row %llu does not match the row "
                     "(row_hashes is corrupt; the rows themselves passed their checksums)\n",
                     a.location.c_str(), static_cast<unsigned long long>(r));
      }
      ++bad_hashes;
    }
    progress.Update(r1 * d.row_bytes, total);
  }
  progress.Finish();
  std::string keys_note;
  bool keys_bad = false;
  const store::Table* t = src.local_table();
  if (d.has_keys) {
    if (t != nullptr && !t->keys_checksummed()) {
      keys_note = "; keys unchecked (format version " + std::to_string(t->format_version()) +
                  " has no key checksums)";
    } else {
      // Every key, in slices; each slice is checked against the keys' checksums.
      constexpr std::uint64_t kSlice = 1 << 16;
      for (std::uint64_t r = 0; r < d.rows && !keys_bad; r += kSlice) {
        auto keys = src.Keys(r, std::min(d.rows, r + kSlice));
        if (keys.ok()) continue;
        if (keys.status().code() != StatusCode::kCorruption) {
          return ReportError("verify", keys.status());
        }
        std::fprintf(stderr, "embstore verify: %s\n", keys.status().message().c_str());
        keys_bad = true;
      }
      if (!keys_bad) keys_note = " and the keys";
    }
  }
  if (bad_hashes > 0 && bad == 0 && !keys_bad) {
    std::fprintf(stderr, "embstore verify: '%s': %llu stored row hashes are wrong\n",
                 a.location.c_str(), static_cast<unsigned long long>(bad_hashes));
    return kExitFailure;
  }
  if (bad > 0 || keys_bad) {
    std::fprintf(stderr, "embstore verify: '%s': %llu of %llu blocks are corrupt%s\n",
                 a.location.c_str(), static_cast<unsigned long long>(bad),
                 static_cast<unsigned long long>(blocks),
                 keys_bad ? ", and so are the keys" : "");
    return kExitFailure;
  }
  std::printf("%s: ok, %llu rows x %llu %s, %llu blocks%s verified in %.2f s\n",
              a.location.c_str(), static_cast<unsigned long long>(d.rows),
              static_cast<unsigned long long>(d.dim),
              std::string(store::DTypeName(d.dtype)).c_str(),
              static_cast<unsigned long long>(blocks), (keys_note + (stored != nullptr ? " and row hashes" : "")).c_str(),
              progress.Seconds());
  return kExitOk;
}

}  // namespace

RunFn RegisterVerify(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Check every checksum block and the keys of a table; exit 1 naming each bad block");
  sub->add_option("LOCATION", args->location,
                  "A table file (.emb), s3://BUCKET/KEY.emb, a shard manifest (.json); or a store "
                  "directory, s3://BUCKET/PREFIX or a server (host:port, unix:PATH) with --table")
      ->required();
  sub->add_option("--table", args->table, "Table name, for a LOCATION that holds several tables");
  sub->add_option("--max-report", args->max_report, "Bad blocks to list at most (default 20)")
      ->check(kPositiveNumber);
  AddConnectFlags(sub, &args->client);
  return [args]() { return Verify(*args); };
}

}  // namespace embstore::cli
