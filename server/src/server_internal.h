// Private: what the server library's own tests reach inside a running Server.
#ifndef EMBSTORE_SERVER_SRC_SERVER_INTERNAL_H_
#define EMBSTORE_SERVER_SRC_SERVER_INTERNAL_H_

#include "catalog.h"
#include "embstore/server/server.h"

namespace embstore::server {

// The catalog of a server made by Server::Start (server.cc); valid while the server lives.
Catalog& CatalogOf(Server& server);

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_SERVER_INTERNAL_H_
