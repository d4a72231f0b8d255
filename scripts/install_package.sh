#!/usr/bin/env bash
# Builds the embstore Python package from this tree and installs it, editable, into a virtual
# environment: python/embstore stays live, the native module and the CLI are copied in.
# scripts/setup.sh and scripts/setup_tf215.sh call it when the package is missing,
# scripts/test.sh after every C++ build. EMBSTORE_PACKAGE_TREE: scripts/package_settings.sh.
# Usage: scripts/install_package.sh [VENV]   (default .venv)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
venv="${1:-.venv}"
if [[ ! -x $venv/bin/python ]]; then
  echo "install_package: no Python at $venv/bin/python (run scripts/setup.sh first)" >&2
  exit 1
fi
source scripts/package_settings.sh
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  ${package_settings[@]+"${package_settings[@]}"} -e python
