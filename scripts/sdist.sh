#!/usr/bin/env bash
# Builds the Python package's source distribution into dist/ (or $1): embstore-VERSION.tar.gz,
# which `pip install` builds from source with CMake and the system's libraries (Debian 12 /
# Ubuntu 22.04+: scripts/debian-packages.txt, without the "tests:" ones; a missing one fails the
# build naming the packages to install, cmake/EmbstoreDependencies.cmake).
#
# The package's pyproject.toml lives in python/ and builds the tree above it; the sdist holds
# that tree (the library components, the CLI, python/) with the pyproject.toml moved to its top,
# its paths rewritten to match. Tests, benchmarks and docs stay out. Only files git tracks are
# taken, as they are in the work tree.
# Usage: scripts/sdist.sh [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
out="$(realpath -m "${1:-$ROOT/dist}")"
log() { echo "sdist: $*"; }
PY="${EMBSTORE_SDIST_PYTHON:-$ROOT/.venv/bin/python}"
"$PY" -c "import scikit_build_core" 2>/dev/null ||
  { echo "sdist: $PY has no scikit-build-core (run scripts/setup.sh --demo first)" >&2; exit 1; }

command -v git >/dev/null && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 ||
  { echo "sdist: needs git and a clone of the repository (it takes the files git tracks)" >&2; exit 1; }

version="$(sed -n 's/^project(embstore VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
work="$(mktemp -d -t embstore-sdist-XXXXXX)"
trap 'rm -rf "$work"' EXIT
stage="$work/embstore-$version"
mkdir -p "$stage" "$out"

# What the package's build configures and compiles (CMakeLists.txt's subdirectories, with
# tests, benchmarks and the Python extension's sources), and the license.
parts=(CMakeLists.txt LICENSE cmake common objstore store convert proto server client cli deploy
       python)
git ls-files -z -- "${parts[@]}" | xargs -0 cp --parents -t "$stage"
cp python/README.md "$stage/README.md"
rm "$stage/python/pyproject.toml" "$stage/python/README.md"

# python/pyproject.toml with the tree at the top: the same settings, the paths one level up.
sed -e 's|^cmake.source-dir = "\.\."|cmake.source-dir = "."|' \
    -e 's|^build-dir = "\.\./build/python/{wheel_tag}"|build-dir = "build/{wheel_tag}"|' \
    -e 's|^wheel.packages = \["embstore"\]|wheel.packages = ["python/embstore"]|' \
    -e 's|^wheel.license-files = \["\.\./LICENSE"\]|wheel.license-files = ["LICENSE"]|' \
    -e 's|^input = "\.\./CMakeLists.txt"|input = "CMakeLists.txt"|' \
    python/pyproject.toml >"$stage/pyproject.toml"
for want in 'cmake.source-dir = "."' 'build-dir = "build/{wheel_tag}"' \
            'wheel.packages = ["python/embstore"]' 'wheel.license-files = ["LICENSE"]' \
            'input = "CMakeLists.txt"'; do
  grep -qF "$want" "$stage/pyproject.toml" ||
    { echo "sdist: python/pyproject.toml changed shape: no '$want' after rewriting" >&2; exit 1; }
done

log "building embstore-$version.tar.gz"
rm -f "$out/embstore-$version.tar.gz"
(cd "$stage" && "$PY" -c 'import sys; from scikit_build_core.build import build_sdist
print(build_sdist(sys.argv[1]))' "$out" >/dev/null)
log "wrote $out/embstore-$version.tar.gz ($(du -h "$out/embstore-$version.tar.gz" | cut -f1))"
