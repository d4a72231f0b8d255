#!/usr/bin/env bash
# Configures and builds one CMake preset (dev by default; release, asan). Incremental.
# Usage: scripts/build.sh [PRESET] [ninja target ...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
preset="${1:-dev}"
shift || true
if [[ ! -f build/$preset/build.ninja ]]; then
  echo "build: configuring preset '$preset' in build/$preset"
  cmake --preset "$preset" >/dev/null
fi
echo "build: building preset '$preset'"
cmake --build --preset "$preset" ${1:+--target "$@"}
