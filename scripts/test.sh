#!/usr/bin/env bash
# Sets up, builds (dev preset) and runs every test: C++ through ctest, Python through pytest.
# Exit status is non-zero if either suite fails. Extra arguments go to pytest.
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
echo "test: pytest"
EMBSTORE_BUILD_DIR="$ROOT/build/dev" .venv/bin/python -m pytest tests/python "$@" || status=1
exit $status
