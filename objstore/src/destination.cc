#include "embstore/objstore/destination.h"

#include <utility>

#include "embstore/objstore/delta.h"

namespace embstore::objstore {

Result<std::unique_ptr<TableDestination>> TableDestination::Open(const std::string& dest,
                                                                 bool overwrite,
                                                                 const std::string& purpose) {
  std::unique_ptr<TableDestination> d(new TableDestination());
  d->dest_ = dest;
  if (!IsObjectUrl(dest)) {
    d->local_ = dest;
    return d;
  }
  EMBSTORE_ASSIGN_OR_RETURN(ObjectUrl url, ParseObjectKeyUrl(dest, "an object key"));
  EMBSTORE_ASSIGN_OR_RETURN(d->store_, OpenObjectStore(url));
  auto head = d->store_->Stat(url);
  if (head.ok() && !overwrite) {
    return Status::AlreadyExists("'" + dest + "' exists; use `overwrite` to replace it");
  }
  if (!head.ok() && head.status().code() != StatusCode::kNotFound) return head.status();
  EMBSTORE_ASSIGN_OR_RETURN(d->scratch_, ScratchDir::Make(purpose));
  d->local_ = d->scratch_->File("table.emb");
  d->url_ = std::move(url);
  return d;
}

TableDestination::~TableDestination() = default;

Result<TransferStats> TableDestination::Publish(const TransferOptions& options) {
  if (!url_) return TransferStats{};
  delta_ = {};
  // The delta against the version about to be replaced, made while it is still there.
  std::string delta_path;
  auto previous = store_->Stat(*url_);
  if (previous.ok()) {
    delta_path = scratch_->File("delta.emb");
    auto made = WriteDelta(*store_, *url_, *previous, local_, scratch_->File("previous.emb"),
                           delta_path);
    if (made.ok()) {
      delta_.rows = made->rows;
      delta_.skipped = made->skipped;
    } else {
      delta_.skipped = made.status().message();
    }
  } else {
    delta_.skipped = previous.status().code() == StatusCode::kNotFound
                         ? "no earlier version"
                         : previous.status().message();
  }
  auto stats = UploadFile(*store_, local_, *url_, options);
  if (stats.ok()) {
    const ObjectUrl delta_url = DeltaUrl(*url_);
    Status st;
    if (delta_.rows > 0) {
      TransferOptions o = options;
      o.progress = nullptr;
      auto up = UploadFile(*store_, delta_path, delta_url, o);
      if (up.ok()) {
        delta_.bytes = up->bytes;
      } else {
        st = up.status();
      }
    }
    if (delta_.rows == 0 || !st.ok()) {
      // A delta of an earlier version is of no use next to this one.
      const Status removed = store_->Delete(delta_url);
      if (!st.ok()) {
        delta_ = {0, 0, "uploading it failed: " + st.message()};
      } else if (!removed.ok()) {
        delta_.skipped += "; removing the old delta failed: " + removed.message();
      }
    }
  }
  scratch_.reset();
  return stats;
}

}  // namespace embstore::objstore
