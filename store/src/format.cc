#include "embstore/store/format.h"

namespace embstore::store {

std::string_view EmbstoreVersion() { return EMBSTORE_VERSION; }

}  // namespace embstore::store
