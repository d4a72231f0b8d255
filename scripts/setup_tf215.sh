#!/usr/bin/env bash
# Creates .venv-tf215, the second test environment: TensorFlow 2.15 (the last release with
# tf.estimator; its tf.keras is Keras 2) with numpy 1.x, pinned in requirements-tf215.txt, and the
# embstore package installed into it, its native module built in .venv's build tree (build/python).
# scripts/setup.sh runs this after setting up .venv; scripts/test.sh runs it as its own step.
# Safe to rerun: it only checks when everything is present. EMBSTORE_SETUP_SKIP_PACKAGE=1 leaves
# the package to the caller, as in scripts/setup.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { echo "setup (TensorFlow 2.15): $*"; }
VENV=.venv-tf215

# TensorFlow 2.15 has wheels for Python 3.9 to 3.11 only.
PY="${EMBSTORE_PYTHON_TF215:-${EMBSTORE_PYTHON:-python3}}"
if [[ ! -x $VENV/bin/python ]]; then
  if ! "$PY" -c 'import sys; sys.exit(not (3, 9) <= sys.version_info[:2] <= (3, 11))'; then
    log "$("$PY" --version 2>&1) cannot install tensorflow-cpu 2.15 (Python 3.9 to 3.11 only);" \
      "set EMBSTORE_PYTHON_TF215 to such an interpreter" >&2
    exit 1
  fi
  log "creating $VENV with $("$PY" --version 2>&1)"
  "$PY" -m venv "$VENV"
fi
stamp=$VENV/.embstore-requirements
want="$(sha256sum requirements-tf215.txt | cut -d' ' -f1)"
if [[ ! -f $stamp || "$(cat "$stamp")" != "$want" ]]; then
  log "installing Python packages from requirements-tf215.txt into $VENV"
  bash scripts/install_requirements.sh "$VENV" -r requirements-tf215.txt
  echo "$want" >"$stamp"
else
  log "Python packages: up to date"
fi

# The package, editable like .venv's (python/embstore is live in both environments). Its native
# module is built in .venv's build tree (build/python/{wheel_tag}, one per Python version, or
# build/dev: scripts/package_settings.sh): the same sources and flags, so only the Python binding
# layer recompiles, not the whole C++ tree. Each environment gets its own installed copy.
install_package() { bash scripts/install_package.sh "$VENV"; }
if [[ "${1:-}" == --package ]]; then
  log "building and installing the embstore Python package into $VENV"
  install_package
elif [[ "${EMBSTORE_SETUP_SKIP_PACKAGE:-0}" == 1 ]]; then
  log "embstore Python package: left to the caller"
elif ! $VENV/bin/python -c "import embstore._native" >/dev/null 2>&1; then
  log "building and installing the embstore Python package into $VENV (first time: a few minutes)"
  install_package
else
  log "embstore Python package: installed"
fi
