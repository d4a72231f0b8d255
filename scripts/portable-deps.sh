#!/usr/bin/env bash
# Builds the libraries a portable (manylinux_2_28) embstore links statically, with zig's clang
# aimed at glibc 2.28, and prints the prefix they are installed under. scripts/wheel.sh --portable
# calls it; run it alone to warm the cache.
#
# Usage: scripts/portable-deps.sh TARGET        TARGET: x86_64 or aarch64
#        scripts/portable-deps.sh --toolchain   installs only the toolchain, prints zig's path
#        scripts/portable-deps.sh --where TARGET  prints the prefix; exit status 3 when not built
#
# What it builds, and from where: scripts/portable-deps.txt (Debian 12's source packages, fetched
# with apt-get source through a scratch apt configuration; nothing is downloaded at configure
# time). The header-only libraries the build also needs (Boost, xsimd, nlohmann-json, CLI11,
# fast_float) are the host's Debian packages, linked into the prefix's include/ one folder at a
# time: the compiler never sees the host's /usr/include, whose glibc headers are newer than 2.28.
#
# The result is cached outside the checkout under $EMBSTORE_CACHE (default
# ~/.cache/embstore)/portable/TARGET-KEY, KEY a hash of portable-deps.txt, this script's RECIPE
# number, zig's version and the glibc version, so a change to any of them builds afresh; old
# builds stay until removed by hand.
# A cold build takes about an hour per target on two cores; a warm one returns at once.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ZIG_VERSION=0.17.1
GLIBC=2.28
# Bump RECIPE whenever a change to this script changes what it builds (flags, options, a step):
# it is part of the cache key with portable-deps.txt, ZIG_VERSION and GLIBC.
RECIPE=2
CACHE="${EMBSTORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/embstore}"

log() { echo "portable-deps: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

mode=build
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  --toolchain) mode=toolchain ;;
  --where) mode=where; shift ;;
  x86_64 | aarch64) ;;
  *) usage >&2; exit 2 ;;
esac
target="${1:-}"
if [[ $mode != toolchain ]]; then
  [[ $target == x86_64 || $target == aarch64 ]] || { usage >&2; exit 2; }
fi

# --- the toolchain: PyPI's ziglang in a venv of its own under the cache --------------------------
TOOLS="$CACHE/portable/toolchain-zig-$ZIG_VERSION"
ZIG="$TOOLS/venv/bin/python -m ziglang"
toolchain() {
  if ! "$TOOLS/venv/bin/python" -m ziglang version >/dev/null 2>&1; then
    log "installing zig $ZIG_VERSION (PyPI's ziglang) into $TOOLS"
    rm -rf "$TOOLS"
    mkdir -p "$TOOLS"
    python3 -m venv "$TOOLS/venv"
    "$TOOLS/venv/bin/pip" install --quiet --disable-pip-version-check "ziglang==$ZIG_VERSION"
  fi
  # Wrappers, one per target and language, so CMake and autoconf see a plain compiler.
  export ZIG_GLOBAL_CACHE_DIR="$TOOLS/zig-cache" ZIG_LOCAL_CACHE_DIR="$TOOLS/zig-cache"
  local t tool
  for t in x86_64 aarch64; do
    for tool in cc c++; do
      # zig reads -march as a CPU name, so GCC's aarch64 spelling (abseil's
      # -march=armv8-a+crypto for its AES code) becomes the -mcpu it means.
      cat >"$TOOLS/$t-$tool" <<EOF
#!/bin/sh
export ZIG_GLOBAL_CACHE_DIR="$TOOLS/zig-cache" ZIG_LOCAL_CACHE_DIR="$TOOLS/zig-cache"
for a in "\$@"; do
  shift
  case "\$a" in
    -march=armv8-a) a=-mcpu=generic ;;
    -march=armv8-a+*) a="-mcpu=generic+\${a#-march=armv8-a+}" ;;
  esac
  set -- "\$@" "\$a"
done
exec "$TOOLS/venv/bin/python" -m ziglang $tool -target $t-linux-gnu.$GLIBC "\$@"
EOF
      chmod +x "$TOOLS/$t-$tool"
    done
  done
  for tool in ar ranlib; do
    printf '#!/bin/sh\nexec "%s/venv/bin/python" -m ziglang %s "$@"\n' "$TOOLS" "$tool" >"$TOOLS/$tool"
    chmod +x "$TOOLS/$tool"
  done
}
if [[ $mode == toolchain ]]; then
  toolchain
  echo "$TOOLS"
  exit 0
fi

# --- the cache key and the prefix ----------------------------------------------------------------
key="$(cat "$ROOT/scripts/portable-deps.txt" <(echo "recipe $RECIPE zig $ZIG_VERSION glibc $GLIBC") |
  sha256sum | cut -c1-12)"
PREFIX="$CACHE/portable/$target-$key"
if [[ $mode == where ]]; then
  [[ -f $PREFIX/.complete ]] || exit 3
  echo "$PREFIX"
  exit 0
fi
if [[ -f $PREFIX/.complete ]]; then
  echo "$PREFIX"
  exit 0
fi

toolchain
CC="$TOOLS/$target-cc"
CXX="$TOOLS/$target-c++"
export AR="$TOOLS/ar" RANLIB="$TOOLS/ranlib"
jobs="$(nproc)"
SRC="$CACHE/portable/sources"
WORK="$CACHE/portable/work-$target-$key"
# A run that failed part way keeps the libraries it finished (each leaves PREFIX/.built-NAME);
# the next run goes on from the first one missing.
mkdir -p "$SRC" "$WORK" "$PREFIX/include" "$PREFIX/lib/pkgconfig"
started=$SECONDS

# --- sources: Debian 12's source packages --------------------------------------------------------
declare -A version tarball
packages=()
while read -r pkg ver tar; do
  [[ -z $pkg || $pkg == \#* ]] && continue
  packages+=("$pkg")
  version[$pkg]="$ver"
  tarball[$pkg]="$tar"
done <"$ROOT/scripts/portable-deps.txt"

fetch_sources() {
  local missing=() pkg
  for pkg in "${packages[@]}"; do
    [[ -f $SRC/${tarball[$pkg]} ]] && continue
    if [[ ${tarball[$pkg]} == *.deb ]]; then  # a binary package, from the host's apt sources
      (cd "$SRC" && apt-get -qq -o APT::Sandbox::User=root download "$pkg=${version[$pkg]}") ||
        die "apt-get download $pkg=${version[$pkg]} failed"
    else
      missing+=("$pkg=${version[$pkg]}")
    fi
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "apt-get is needed to fetch Debian's source packages"
  local apt="$SRC/apt"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  cat >"$apt/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm-updates main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)
  log "fetching Debian source packages: ${missing[*]}"
  apt-get "${opts[@]}" -qq update || die "apt-get update (deb-src) failed"
  (cd "$SRC" && apt-get "${opts[@]}" -qq source --download-only "${missing[@]}") ||
    die "apt-get source failed for: ${missing[*]}"
  for pkg in "${packages[@]}"; do
    [[ -f $SRC/${tarball[$pkg]} ]] || die "apt-get source $pkg did not give ${tarball[$pkg]}"
  done
}
fetch_sources

# unpack PKG: a fresh copy of PKG's upstream tarball under WORK; prints its folder.
unpack() {
  local dir="$WORK/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -xf "$SRC/${tarball[$1]}" -C "$dir" --strip-components=1
  echo "$dir"
}

# Flags every library gets: position-independent (they end up in a shared module), symbols
# hidden by default where the library allows it, no debug info (the wheel stays small).
CFLAGS_ALL="-O2 -fPIC -ffunction-sections -fdata-sections"
export CFLAGS="$CFLAGS_ALL" CXXFLAGS="$CFLAGS_ALL"
unset LDFLAGS CPPFLAGS PKG_CONFIG_PATH
export PKG_CONFIG_LIBDIR="$PREFIX/lib/pkgconfig"  # never the host's .pc files

# The CMake toolchain file every CMake build here (and the portable embstore build) uses.
processor="$target"
cat >"$PREFIX/toolchain.cmake" <<EOF
# Written by scripts/portable-deps.sh: zig's clang for $target-linux-gnu.$GLIBC, finding
# libraries and headers only under this prefix, and programs (protoc, grpc_cpp_plugin) on the host.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR $processor)
set(CMAKE_C_COMPILER "$CC")
set(CMAKE_CXX_COMPILER "$CXX")
set(CMAKE_AR "$AR" CACHE FILEPATH "")
set(CMAKE_RANLIB "$RANLIB" CACHE FILEPATH "")
set(CMAKE_FIND_ROOT_PATH "$PREFIX")
set(CMAKE_PREFIX_PATH "$PREFIX")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(EMBSTORE_PORTABLE_PREFIX "$PREFIX")
set(ENV{PKG_CONFIG_LIBDIR} "$PREFIX/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
EOF

cmake_build() {  # cmake_build NAME SRC_DIR ARGS...: configure, build and install one library
  local name="$1" src="$2"
  shift 2
  rm -rf "$WORK/$name-build"
  cmake -S "$src" -B "$WORK/$name-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$PREFIX/toolchain.cmake" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF "$@" \
    >"$WORK/$name-configure.log" 2>&1 || { tail -40 "$WORK/$name-configure.log" >&2; die "$name: configure failed"; }
  cmake --build "$WORK/$name-build" -j "$jobs" >"$WORK/$name-build.log" 2>&1 ||
    { tail -40 "$WORK/$name-build.log" >&2; die "$name: build failed (log: $WORK/$name-build.log)"; }
  cmake --install "$WORK/$name-build" >/dev/null
  rm -rf "$WORK/$name-build" "$src"
}

host_triplet() { [[ $target == x86_64 ]] && echo x86_64-linux-gnu || echo aarch64-linux-gnu; }

build_zlib() {
  local src
  src="$(unpack zlib)"
  (cd "$src" && CC="$CC" ./configure --static --prefix="$PREFIX" --libdir="$PREFIX/lib" &&
    make -j "$jobs" libz.a && make install) >"$WORK/zlib.log" 2>&1 ||
    { tail -30 "$WORK/zlib.log" >&2; die "zlib: build failed"; }
  rm -rf "$src"
}

# OpenSSL: static, the legacy provider built in, its configuration and certificates where
# Debian and Ubuntu keep them (/usr/lib/ssl -> /etc/ssl). embstore points libcurl and gRPC at the
# host's CA bundle itself (common/src/ca_bundle.cc), so other layouts (RHEL's /etc/pki) work too.
build_openssl() {
  local src ossl_target=linux-x86_64
  [[ $target == aarch64 ]] && ossl_target=linux-aarch64
  src="$(unpack openssl)"
  (cd "$src" && CC="$CC" ./Configure "$ossl_target" no-shared no-module no-tests \
    no-engine no-dso no-comp no-ui-console no-afalgeng --prefix="$PREFIX" --libdir=lib \
    --openssldir=/usr/lib/ssl $CFLAGS_ALL && make -j "$jobs" build_libs && make install_dev) \
    >"$WORK/openssl.log" 2>&1 || { tail -30 "$WORK/openssl.log" >&2; die "openssl: build failed"; }
  rm -rf "$src"
}

build_c-ares() {
  cmake_build c-ares "$(unpack c-ares)" -DCARES_STATIC=ON -DCARES_SHARED=OFF \
    -DCARES_STATIC_PIC=ON -DCARES_BUILD_TOOLS=OFF -DCARES_BUILD_TESTS=OFF
}

# libcurl: HTTP and HTTPS only (S3 and WebHDFS), over this OpenSSL, zlib and c-ares.
build_curl() {
  local src
  src="$(unpack curl)"
  (cd "$src" && CC="$CC" ./configure --host="$(host_triplet)" --prefix="$PREFIX" \
    --libdir="$PREFIX/lib" --disable-shared --enable-static --with-pic --with-openssl="$PREFIX" \
    --with-zlib="$PREFIX" --enable-ares="$PREFIX" --without-libpsl --without-libidn2 \
    --without-nghttp2 --without-brotli --without-zstd --without-librtmp --without-libssh2 \
    --without-libgsasl --disable-ldap --disable-ldaps --disable-ftp --disable-file --disable-dict \
    --disable-gopher --disable-imap --disable-pop3 --disable-rtsp --disable-smtp --disable-telnet \
    --disable-tftp --disable-mqtt --disable-smb --disable-manual --disable-docs \
    --without-ca-bundle --without-ca-path --with-ca-fallback &&
    make -j "$jobs" -C lib && make -C lib install && make -C include install &&
    make install-pkgconfigDATA) >"$WORK/curl.log" 2>&1 ||
    { tail -30 "$WORK/curl.log" >&2; die "curl: build failed"; }
  rm -rf "$src"
}

# xxHash: the one C file, as a static library with a pkg-config file.
build_xxhash() {
  local src
  src="$(unpack xxhash)"
  "$CC" $CFLAGS_ALL -c "$src/xxhash.c" -o "$WORK/xxhash.o"
  "$AR" rcs "$PREFIX/lib/libxxhash.a" "$WORK/xxhash.o"
  cp "$src/xxhash.h" "$PREFIX/include/"
  printf 'prefix=%s\nName: libxxhash\nDescription: xxHash\nVersion: %s\nLibs: -L${prefix}/lib -lxxhash\nCflags: -I${prefix}/include\n' \
    "$PREFIX" "${version[xxhash]%%-*}" >"$PREFIX/lib/pkgconfig/libxxhash.pc"
  rm -rf "$src"
}

# cpp-httplib: header-only upstream (Debian's binary package splits it into a shared library).
build_cpp-httplib() {
  local src
  src="$(unpack cpp-httplib)"
  cp "$src/httplib.h" "$PREFIX/include/"
  printf 'prefix=%s\nName: cpp-httplib\nDescription: cpp-httplib (header only)\nVersion: %s\nCflags: -I${prefix}/include\n' \
    "$PREFIX" "${version[cpp-httplib]%%+*}" >"$PREFIX/lib/pkgconfig/cpp-httplib.pc"
  rm -rf "$src"
}

# pugixml: S3 replies (objstore). Its CMake build installs the static library and pugixml.pc.
build_pugixml() {
  cmake_build pugixml "$(unpack pugixml)" -DPUGIXML_BUILD_TESTS=OFF
}

build_abseil() {
  cmake_build abseil "$(unpack abseil)" -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON \
    -DABSL_ENABLE_INSTALL=ON
}

# re2, with its generated tables (Debian's build does the same with REBUILD_TABLES=1).
build_re2() {
  local src
  src="$(unpack re2)"
  mkdir -p "$WORK/unicode"
  dpkg-deb -x "$SRC/${tarball[unicode-data]}" "$WORK/unicode"
  sed -i -e "s|^_UNICODE_DIR = .*|_UNICODE_DIR = \"$WORK/unicode/usr/share/unicode\"|" \
    -e 's|^from six.moves import urllib$|import urllib.request|' "$src/re2/unicode.py"
  (cd "$src" && perl re2/make_perl_groups.pl >re2/perl_groups.cc &&
    python3 re2/make_unicode_casefold.py >re2/unicode_casefold.cc &&
    python3 re2/make_unicode_groups.py >re2/unicode_groups.cc) ||
    die "re2: generating its Unicode tables failed"
  rm -rf "$WORK/unicode"
  cmake_build re2 "$src" -DRE2_BUILD_TESTING=OFF
}

build_protobuf() {
  cmake_build protobuf "$(unpack protobuf)" -DCMAKE_CXX_STANDARD=17 -Dprotobuf_BUILD_TESTS=OFF \
    -Dprotobuf_BUILD_PROTOC_BINARIES=OFF -Dprotobuf_BUILD_LIBPROTOC=ON -Dprotobuf_WITH_ZLIB=ON
}

# gRPC: the C and C++ libraries. gRPC_BUILD_CODEGEN stays on because grpc++_reflection (the
# server's reflection service) is built only with it; its code is generated by the host's protoc
# (the same protobuf version), and the generator plugins themselves are not built (the host's
# grpc_cpp_plugin is used; libprotoc above is only for the plugin support library). Its
# CMakeLists downloads the proto sources of opencensus and xds when their folders are missing;
# nothing built here uses them, so empty folders stand in (Debian's build patches the downloads
# out).
build_grpc() {
  local src
  src="$(unpack grpc)"
  mkdir -p "$src/third_party/opencensus-proto/src" "$src/third_party/xds" \
    "$src/third_party/envoy-api" "$src/third_party/googleapis"
  # gRPC 1.51 predates the clang 19 error for `template` without an argument list.
  CXXFLAGS="$CFLAGS_ALL -Wno-missing-template-arg-list-after-template-kw" \
    cmake_build grpc "$src" -DCMAKE_CXX_STANDARD=17 -DgRPC_INSTALL=ON \
      -DgRPC_BUILD_TESTS=OFF -DgRPC_ABSL_PROVIDER=package -DgRPC_CARES_PROVIDER=package \
      -DgRPC_PROTOBUF_PROVIDER=package -DgRPC_PROTOBUF_PACKAGE_TYPE=CONFIG \
      -DgRPC_RE2_PROVIDER=package -DgRPC_SSL_PROVIDER=package -DgRPC_ZLIB_PROVIDER=package \
      -DgRPC_BUILD_CODEGEN=ON -DgRPC_BUILD_CSHARP_EXT=OFF -DgRPC_BUILD_GRPC_CPP_PLUGIN=OFF \
      -DgRPC_BUILD_GRPC_CSHARP_PLUGIN=OFF -DgRPC_BUILD_GRPC_NODE_PLUGIN=OFF \
      -DgRPC_BUILD_GRPC_OBJECTIVE_C_PLUGIN=OFF -DgRPC_BUILD_GRPC_PHP_PLUGIN=OFF \
      -DgRPC_BUILD_GRPC_PYTHON_PLUGIN=OFF -DgRPC_BUILD_GRPC_RUBY_PLUGIN=OFF \
      -DProtobuf_PROTOC_EXECUTABLE=/usr/bin/protoc
}

build_googletest() {
  cmake_build googletest "$(unpack googletest)" -DCMAKE_CXX_STANDARD=17 -DINSTALL_GTEST=ON
}

for lib in zlib openssl c-ares curl xxhash cpp-httplib pugixml abseil re2 protobuf grpc googletest; do
  [[ -f $PREFIX/.built-$lib ]] && continue
  log "building $lib ($(((SECONDS - started) / 60)) min so far)"
  "build_$lib"
  touch "$PREFIX/.built-$lib"
done

# Header-only libraries from the host, one folder each (never all of /usr/include).
for h in boost xsimd nlohmann CLI fast_float; do
  [[ -d /usr/include/$h ]] || die "/usr/include/$h is missing: install scripts/debian-packages.txt's packages"
  ln -sfn "/usr/include/$h" "$PREFIX/include/$h"
done

rm -rf "$WORK"
touch "$PREFIX/.complete"
log "done in $(((SECONDS - started) / 60)) min: $PREFIX"
echo "$PREFIX"
