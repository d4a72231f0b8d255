// The location resolver (open_source.h): classifies a location string, then opens it with the
// factory of its kind.
#include "embstore/client/open_source.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "embstore/client/client.h"
#include "embstore/client/sharded.h"
#include "embstore/common/address.h"
#include "embstore/objstore/object_store.h"
#include "embstore/store/names.h"

namespace embstore::client {
namespace {

// The table name `o.table` must be, for a location that is one table named `name`.
Status CheckOneTable(const std::string& location, LocationKind kind, const std::string& name,
                     const SourceOptions& o) {
  if (o.table.empty() || o.table == name) return Status::OK();
  return Status::InvalidArgument(std::string(LocationKindName(kind)) + " '" + location +
                                 "' holds table '" + name + "', not '" + o.table + "'");
}

Status NeedsTable(const std::string& location, LocationKind kind, const SourceOptions& o) {
  if (o.table.empty()) {
    return Status::InvalidArgument(std::string(LocationKindName(kind)) + " '" + location +
                                   "' holds several tables: it needs a table name");
  }
  return store::ValidateTableName(o.table);
}

// The object of the table at an s3:// or hdfs:// location: the key itself, or PREFIX/NAME.emb for a
// bucket or folder, a prefix ending in '/', or (with a table name) a key that does not end in .emb.
Result<objstore::ObjectUrl> TableObject(const std::string& location, const SourceOptions& o) {
  EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl url, objstore::ParseObjectUrl(location));
  if (url.NamesPrefix() || (!o.table.empty() && !url.key.ends_with(store::kTableSuffix))) {
    EMBSTORE_RETURN_NOT_OK(NeedsTable(location, LocationKind::kObjectPrefix, o));
    if (!url.NamesPrefix()) url.key += '/';
    url.key += o.table + std::string(store::kTableSuffix);
  } else {
    EMBSTORE_RETURN_NOT_OK(
        CheckOneTable(location, LocationKind::kObject, store::TableNameOfFile(url.key), o));
  }
  return url;
}

}  // namespace

// "tables/v2:old.emb" that does not exist is a missing file, not a bad address.
bool IsServerTarget(std::string_view s) {
  for (std::string_view scheme : {"unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:"}) {
    if (s.starts_with(scheme)) return true;
  }
  return s.find(':') != std::string_view::npos && s.find('/') == std::string_view::npos;
}

std::string_view LocationKindName(LocationKind kind) {
  switch (kind) {
    case LocationKind::kObject:
      return "object";
    case LocationKind::kObjectPrefix:
      return "object prefix";
    case LocationKind::kManifest:
      return "manifest";
    case LocationKind::kFile:
      return "file";
    case LocationKind::kDirectory:
      return "directory";
    case LocationKind::kServer:
      return "server";
  }
  return "location";
}

bool HoldsSeveralTables(LocationKind kind) {
  return kind == LocationKind::kObjectPrefix || kind == LocationKind::kDirectory ||
         kind == LocationKind::kServer;
}

Result<LocationKind> ClassifyLocation(const std::string& location) {
  if (location.empty()) {
    return Status::InvalidArgument(
        "empty location: give a table file, a store directory, a "
        "server, s3:// or hdfs://");
  }
  if (objstore::IsObjectUrl(location)) {
    EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl url, objstore::ParseObjectUrl(location));
    return url.NamesPrefix() ? LocationKind::kObjectPrefix : LocationKind::kObject;
  }
  struct stat st;
  if (::stat(location.c_str(), &st) == 0) {
    if (S_ISREG(st.st_mode)) {
      return location.ends_with(".json") ? LocationKind::kManifest : LocationKind::kFile;
    }
    if (S_ISDIR(st.st_mode)) return LocationKind::kDirectory;
  } else if (errno != ENOENT && errno != ENOTDIR && !IsServerTarget(location)) {
    return Status::FromErrno("stat '" + location + "'", errno);
  }
  if (IsServerTarget(location)) {
    // Checked as the client checks a target: a port out of range is an error, never wrapped.
    EMBSTORE_RETURN_NOT_OK(ParseAddress(location, AddressUse::kConnect, "server target").status());
    return LocationKind::kServer;
  }
  return Status::NotFound("'" + location +
                          "' is neither a table file, a store directory, a shard manifest "
                          "(.json), an s3:// or hdfs:// address nor a server target "
                          "(host:port or unix:PATH)");
}

Result<std::unique_ptr<RowSource>> OpenSource(const std::string& location, const SourceOptions& o) {
  EMBSTORE_ASSIGN_OR_RETURN(LocationKind kind, ClassifyLocation(location));
  switch (kind) {
    case LocationKind::kObject:
    case LocationKind::kObjectPrefix: {
      EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl url, TableObject(location, o));
      return OpenObjectSource(url.ToString());
    }
    case LocationKind::kManifest: {
      EMBSTORE_ASSIGN_OR_RETURN(auto src, OpenShardedSource(location, o));
      EMBSTORE_RETURN_NOT_OK(CheckOneTable(location, kind, src->desc().name, o));
      return src;
    }
    case LocationKind::kFile:
      EMBSTORE_RETURN_NOT_OK(CheckOneTable(location, kind, store::TableNameOfFile(location), o));
      return OpenFileSource(location);
    case LocationKind::kDirectory: {
      EMBSTORE_RETURN_NOT_OK(NeedsTable(location, kind, o));
      std::string path = location;
      if (!path.ends_with('/')) path += '/';
      path += o.table + std::string(store::kTableSuffix);
      struct stat st;
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return Status::NotFound("no table '" + o.table + "' in store directory '" + location +
                                "' (looked for '" + path + "')");
      }
      return OpenFileSource(path);
    }
    case LocationKind::kServer: {
      EMBSTORE_RETURN_NOT_OK(NeedsTable(location, kind, o));
      ConnectOptions c = o.connect;
      c.target = location;
      return OpenServerSource(c, o.table, o.allow_local, o.open_timeout);
    }
  }
  return Status::Internal("unhandled location kind");
}

Result<std::string> TableObjectUrl(const std::string& location, const std::string& table) {
  SourceOptions o;
  o.table = table;
  EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl url, TableObject(location, o));
  return url.ToString();
}

Result<std::vector<std::string>> ListTables(const std::string& location,
                                            const ConnectOptions& connect) {
  EMBSTORE_ASSIGN_OR_RETURN(LocationKind kind, ClassifyLocation(location));
  std::vector<std::string> names;
  switch (kind) {
    case LocationKind::kObject: {
      EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl url, objstore::ParseObjectUrl(location));
      names.push_back(store::TableNameOfFile(url.key));
      break;
    }
    case LocationKind::kObjectPrefix: {
      EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl url, objstore::ParseObjectUrl(location));
      EMBSTORE_ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(url));
      EMBSTORE_ASSIGN_OR_RETURN(auto objects, store->List(url));
      for (const auto& obj : objects) {
        std::string_view rest = std::string_view(obj.key).substr(url.key.size());
        if (rest.find('/') != std::string_view::npos) continue;  // deeper than the prefix
        if (auto name = store::TableNameOfEntry(rest)) names.push_back(std::move(*name));
      }
      break;
    }
    case LocationKind::kManifest: {
      EMBSTORE_ASSIGN_OR_RETURN(ShardManifest m, ReadShardManifest(location));
      names.push_back(m.table);
      break;
    }
    case LocationKind::kFile:
      names.push_back(store::TableNameOfFile(location));
      break;
    case LocationKind::kDirectory: {
      DIR* d = ::opendir(location.c_str());
      if (d == nullptr) return Status::FromErrno("list store directory '" + location + "'", errno);
      while (struct dirent* de = ::readdir(d)) {
        if (auto name = store::TableNameOfEntry(de->d_name)) names.push_back(std::move(*name));
      }
      ::closedir(d);
      break;
    }
    case LocationKind::kServer: {
      ConnectOptions c = connect;
      c.target = location;
      EMBSTORE_ASSIGN_OR_RETURN(auto client, Client::Connect(c));
      EMBSTORE_ASSIGN_OR_RETURN(auto tables, client->ListTables());
      for (auto& t : tables) names.push_back(std::move(t.name));
      break;
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace embstore::client
