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

# A portable build (scripts/wheel.sh --portable) uses the toolchain file that
# scripts/portable-deps.sh writes: it sets EMBSTORE_PORTABLE_PREFIX, where the static libraries
# built for glibc 2.28 live, and finds nothing of the host's but programs. The header-only
# libraries are the host's Debian headers linked into the prefix one folder each, without their
# CMake files (those name /usr/include, which would put the host's glibc headers in front of the
# target's), so their targets, and those of the static libraries, come from EmbstorePortable.
if(EMBSTORE_PORTABLE_PREFIX)
  include(EmbstorePortable)
endif()

find_package(Boost 1.74 QUIET)
embstore_require(Boost_FOUND "Boost.Interprocess 1.74" libboost-dev)
if(NOT EMBSTORE_PORTABLE_PREFIX)
  find_package(xsimd QUIET)
endif()
embstore_require(xsimd_FOUND "xsimd" libxsimd-dev)
if(NOT EMBSTORE_PORTABLE_PREFIX)
  find_package(nlohmann_json 3 QUIET)
endif()
embstore_require(nlohmann_json_FOUND "nlohmann-json 3" nlohmann-json3-dev)
if(NOT EMBSTORE_PORTABLE_PREFIX)
  find_package(CLI11 QUIET)
endif()
embstore_require(CLI11_FOUND "CLI11" libcli11-dev)
find_package(PkgConfig QUIET)
embstore_require(PKG_CONFIG_FOUND "pkg-config" pkg-config)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(XXHASH QUIET IMPORTED_TARGET libxxhash)
  embstore_require(XXHASH_FOUND "xxHash" libxxhash-dev)
  pkg_check_modules(PUGIXML QUIET IMPORTED_TARGET pugixml)
  embstore_require(PUGIXML_FOUND "pugixml" libpugixml-dev)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
  embstore_require(HTTPLIB_FOUND "cpp-httplib" libcpp-httplib-dev)
endif()
if(NOT EMBSTORE_PORTABLE_PREFIX)
  find_package(Protobuf QUIET)
endif()
embstore_require(Protobuf_FOUND "Protobuf" libprotobuf-dev protobuf-compiler)
if(NOT EMBSTORE_PORTABLE_PREFIX)
  find_package(gRPC CONFIG QUIET)
endif()
embstore_require(gRPC_FOUND "gRPC C++" libgrpc++-dev protobuf-compiler-grpc)
if(NOT EMBSTORE_PORTABLE_PREFIX)
  find_package(CURL 7.75 QUIET)
endif()
embstore_require(CURL_FOUND "libcurl 7.75" libcurl4-openssl-dev)
if(NOT EMBSTORE_PORTABLE_PREFIX)
  find_package(ZLIB QUIET)
endif()
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

# embstore::grpc: gRPC C++ (with server reflection) and protobuf, for every target that uses them.
# Shared libraries, except in a target whose EMBSTORE_STATIC_GRPC property is on (the embstore
# CLI, cli/CMakeLists.txt): there the distribution's static archives of gRPC, protobuf, abseil,
# re2 and c-ares, so that each run of the CLI loads 39 shared libraries instead of 88 (its start
# took 15 ms instead of 21-29 ms here, in syncs with a spare that take 0.10-0.13 s in all). The
# Python module and the tests keep the shared libraries; a portable build's are static already.
add_library(embstore_grpc INTERFACE)
add_library(embstore::grpc ALIAS embstore_grpc)
set(EMBSTORE_STATIC_GRPC_CLI OFF)
if(NOT EMBSTORE_PORTABLE_PREFIX)
  get_target_property(_grpcpp gRPC::grpc++ IMPORTED_LOCATION_NONE)
  if(_grpcpp)
    get_filename_component(_libdir "${_grpcpp}" DIRECTORY)
    set(_archives "")
    foreach(_lib grpc++_reflection grpc++ grpc upb address_sorting re2 cares gpr protobuf)
      list(APPEND _archives "${_libdir}/lib${_lib}.a")
    endforeach()
    file(GLOB _absl "${_libdir}/libabsl_*.a")
    set(EMBSTORE_STATIC_GRPC_CLI ON)
    foreach(_archive IN LISTS _archives)
      if(NOT EXISTS "${_archive}")
        set(EMBSTORE_STATIC_GRPC_CLI OFF)
      endif()
    endforeach()
    find_package(OpenSSL QUIET)  # the static archives' TLS, from the shared libssl
    if(NOT _absl OR NOT OpenSSL_FOUND)
      set(EMBSTORE_STATIC_GRPC_CLI OFF)
    endif()
  endif()
  option(EMBSTORE_STATIC_GRPC "Link the embstore CLI with the static gRPC and protobuf archives"
         ${EMBSTORE_STATIC_GRPC_CLI})
  set(EMBSTORE_STATIC_GRPC_CLI ${EMBSTORE_STATIC_GRPC})
endif()
if(EMBSTORE_STATIC_GRPC_CLI)
  add_library(embstore_grpc_static INTERFACE)
  # The archives reference each other in cycles (abseil's most of all): one group.
  target_link_libraries(embstore_grpc_static INTERFACE
    "-Wl,--start-group" ${_archives} ${_absl} "-Wl,--end-group"
    OpenSSL::SSL OpenSSL::Crypto ZLIB::ZLIB Threads::Threads ${CMAKE_DL_LIBS} rt)
  target_include_directories(embstore_grpc_static SYSTEM INTERFACE
    $<TARGET_PROPERTY:gRPC::grpc++,INTERFACE_INCLUDE_DIRECTORIES>)
  set(_static "$<BOOL:$<TARGET_PROPERTY:EMBSTORE_STATIC_GRPC>>")
  foreach(_target gRPC::grpc++ gRPC::grpc++_reflection protobuf::libprotobuf)
    target_link_libraries(embstore_grpc INTERFACE "$<$<NOT:${_static}>:${_target}>")
  endforeach()
  target_link_libraries(embstore_grpc INTERFACE "$<${_static}:embstore_grpc_static>")
  # Headers as the shared libraries give them, to every target alike.
  target_include_directories(embstore_grpc SYSTEM INTERFACE
    $<TARGET_PROPERTY:gRPC::grpc++,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:protobuf::libprotobuf,INTERFACE_INCLUDE_DIRECTORIES>)
else()
  target_link_libraries(embstore_grpc INTERFACE gRPC::grpc++ gRPC::grpc++_reflection
                                                protobuf::libprotobuf)
endif()
