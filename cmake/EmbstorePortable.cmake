# Targets of a portable build (see EmbstoreDependencies.cmake): everything links statically from
# EMBSTORE_PORTABLE_PREFIX, and the generators are the host's (Debian's protoc and
# grpc_cpp_plugin, the same versions as the protobuf and gRPC sources built there).
set(_prefix "${EMBSTORE_PORTABLE_PREFIX}")
set(_include "${_prefix}/include")

foreach(_name xsimd nlohmann_json::nlohmann_json CLI11::CLI11)
  add_library(${_name} INTERFACE IMPORTED)
  set_target_properties(${_name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_include}")
endforeach()
set(xsimd_FOUND TRUE)
set(nlohmann_json_FOUND TRUE)
set(CLI11_FOUND TRUE)
set(Boost_NO_BOOST_CMAKE ON)  # FindBoost finds the headers under the prefix

# Static OpenSSL, zlib and c-ares, then libcurl over them (autotools writes no CMake package, and
# FindCURL's target lacks the private libraries a static libcurl needs).
set(OPENSSL_USE_STATIC_LIBS TRUE)
set(OPENSSL_ROOT_DIR "${_prefix}")
find_package(OpenSSL REQUIRED)
set(ZLIB_USE_STATIC_LIBS ON)
find_package(ZLIB REQUIRED)
find_package(c-ares CONFIG REQUIRED)
add_library(CURL::libcurl STATIC IMPORTED)
set_target_properties(CURL::libcurl PROPERTIES
  IMPORTED_LOCATION "${_prefix}/lib/libcurl.a"
  INTERFACE_INCLUDE_DIRECTORIES "${_include}"
  INTERFACE_COMPILE_DEFINITIONS CURL_STATICLIB
  INTERFACE_LINK_LIBRARIES "OpenSSL::SSL;OpenSSL::Crypto;ZLIB::ZLIB;c-ares::cares;Threads::Threads")
set(CURL_FOUND TRUE)

# protobuf and gRPC from their CMake packages (which bring abseil, re2 and the rest); the code
# generators from the host.
find_package(protobuf CONFIG REQUIRED)
set(Protobuf_FOUND TRUE)
find_program(_protoc protoc REQUIRED)
find_program(_grpc_cpp_plugin grpc_cpp_plugin REQUIRED)
if(NOT TARGET protobuf::protoc)
  add_executable(protobuf::protoc IMPORTED)
  set_target_properties(protobuf::protoc PROPERTIES IMPORTED_LOCATION "${_protoc}")
endif()
find_package(gRPC CONFIG REQUIRED)
if(NOT TARGET gRPC::grpc_cpp_plugin)
  add_executable(gRPC::grpc_cpp_plugin IMPORTED)
  set_target_properties(gRPC::grpc_cpp_plugin PROPERTIES IMPORTED_LOCATION "${_grpc_cpp_plugin}")
endif()

# libc++ is linked into each binary by zig's toolchain. The Python module exports only its init
# function (python/src/native.map), so none of protobuf's, gRPC's or OpenSSL's symbols can meet
# TensorFlow's or PyTorch's copies. The binaries are stripped as they are linked (the host's
# strip cannot read an aarch64 ELF).
add_link_options("LINKER:--strip-all")
