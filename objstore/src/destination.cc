#include "embstore/objstore/destination.h"

#include <utility>

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
  auto stats = UploadFile(*store_, local_, *url_, options);
  scratch_.reset();
  return stats;
}

}  // namespace embstore::objstore
