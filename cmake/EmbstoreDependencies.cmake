# Finds every dependency of the build, and when any is missing, fails once with the Debian /
# Ubuntu packages that provide them (scripts/debian-packages.txt lists them all), instead of
# CMake's first "Could not find a package configuration file" naming a CMake package. A source
# build (the sdist, pip install from a clone) usually fails here first.

set(_embstore_missing "")
# embstore_require(FOUND_VAR WHAT PACKAGES...): notes PACKAGES when FOUND_VAR is false.
macro(embstore_require found what)
  if(NOT ${found})
    list(APPEND _embstore_missing ${ARGN})
    list(APPEND _embstore_missing_what "${what}")
  endif()
endmacro()

find_package(Threads REQUIRED)
find_package(Boost 1.74 QUIET)
embstore_require(Boost_FOUND "Boost.Interprocess 1.74" libboost-dev)
find_package(xsimd QUIET)
embstore_require(xsimd_FOUND "xsimd" libxsimd-dev)
find_package(nlohmann_json 3 QUIET)
embstore_require(nlohmann_json_FOUND "nlohmann-json 3" nlohmann-json3-dev)
find_package(CLI11 QUIET)
embstore_require(CLI11_FOUND "CLI11" libcli11-dev)
find_package(PkgConfig QUIET)
embstore_require(PKG_CONFIG_FOUND "pkg-config" pkg-config)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(XXHASH QUIET IMPORTED_TARGET libxxhash)
  embstore_require(XXHASH_FOUND "xxHash" libxxhash-dev)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
  embstore_require(HTTPLIB_FOUND "cpp-httplib" libcpp-httplib-dev)
endif()
find_package(Protobuf QUIET)
embstore_require(Protobuf_FOUND "Protobuf" libprotobuf-dev protobuf-compiler)
find_package(gRPC CONFIG QUIET)
embstore_require(gRPC_FOUND "gRPC C++" libgrpc++-dev protobuf-compiler-grpc)
find_package(CURL 7.75 QUIET)
embstore_require(CURL_FOUND "libcurl 7.75" libcurl4-openssl-dev)
find_package(ZLIB QUIET)
embstore_require(ZLIB_FOUND "zlib" zlib1g-dev)
find_path(EMBSTORE_FAST_FLOAT_INCLUDE fast_float/fast_float.h)
embstore_require(EMBSTORE_FAST_FLOAT_INCLUDE "fast_float" libfast-float-dev)
if(EMBSTORE_BUILD_TESTS)
  find_package(GTest QUIET)
  embstore_require(GTest_FOUND "GoogleTest (EMBSTORE_BUILD_TESTS)" libgtest-dev libgmock-dev)
endif()
if(EMBSTORE_BUILD_BENCH)
  find_package(benchmark QUIET)
  embstore_require(benchmark_FOUND "Google Benchmark (EMBSTORE_BUILD_BENCH)" libbenchmark-dev)
endif()

if(_embstore_missing)
  list(REMOVE_DUPLICATES _embstore_missing)
  list(JOIN _embstore_missing " " _embstore_packages)
  list(JOIN _embstore_missing_what ", " _embstore_what)
  message(FATAL_ERROR
    "embstore cannot be built here: ${_embstore_what} not found.\n"
    "On Debian 12 or Ubuntu 22.04 and later, install them with:\n"
    "  sudo apt-get install ${_embstore_packages}\n"
    "(scripts/debian-packages.txt lists every package the build, tests and benchmarks use; "
    "elsewhere, point CMAKE_PREFIX_PATH at installations of these libraries.)")
endif()
