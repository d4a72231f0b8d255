#!/usr/bin/env bash
# Sets up, builds (dev preset) and runs every test: C++ through ctest, Python through pytest.
# Exit status is non-zero if any suite fails. Extra arguments go to pytest.
# EMBSTORE_SKIP_FUZZ=1 skips the converter's fuzz smoke run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh dev
echo "test: refreshing the Python package's native module"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e python

status=0
echo "test: ctest"
ctest --preset dev || status=1
if [[ "${EMBSTORE_SKIP_FUZZ:-0}" != 1 ]] && command -v clang++ >/dev/null; then
  # A bounded libFuzzer run of the converter's parser under ASan+UBSan (docs/CONVERT.md).
  echo "test: converter fuzz smoke run (clang, libFuzzer, ASan+UBSan)"
  if [[ ! -f build/fuzz/build.ninja ]]; then
    CC=clang CXX=clang++ cmake --preset asan -B build/fuzz -DEMBSTORE_BUILD_FUZZ=ON >/dev/null
  fi
  cmake --build build/fuzz --target convert_fuzz
  ctest --test-dir build/fuzz -R convert_fuzz_smoke --output-on-failure || status=1
fi
echo "test: pytest"
EMBSTORE_BUILD_DIR="$ROOT/build/dev" .venv/bin/python -m pytest tests/python "$@" || status=1
exit $status
