#!/usr/bin/env bash
# Installs what embstore needs on Debian 12: the Debian packages in scripts/debian-packages.txt,
# the Python packages in requirements.txt (into .venv) and the TensorFlow 2.15 test environment
# (.venv-tf215, scripts/setup_tf215.sh). Safe to rerun; does nothing but check
# when everything is present. Needs root (or sudo) only when a Debian package is missing.
#
# --demo installs only what the main job needs (scripts/demo.sh): the Debian packages not marked
# "tests:", and numpy with the package's build tools in .venv (at requirements.txt's pins), then
# the package itself built in build/release; no TensorFlow, PyTorch or test environment. A later
# run without --demo adds the rest.
# Usage: scripts/setup.sh [--demo]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { echo "setup: $*"; }
demo=0
case "${1:-}" in
  --demo) demo=1 ;;
  "") ;;
  -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

# --- Debian packages ---------------------------------------------------------------------------
if ((demo)); then
  mapfile -t packages < <(grep -v '#[[:space:]]*tests:' scripts/debian-packages.txt |
    sed -e 's/#.*//' -e 's/[[:space:]]*$//' | grep -v '^$')
else
  mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' scripts/debian-packages.txt |
    grep -v '^$')
fi
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  log "installing ${#missing[@]} Debian package(s): ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  log "Debian packages installed"
else
  log "Debian packages: all ${#packages[@]} present"
fi

# --- Python virtual environment ------------------------------------------------------------------
PY="${EMBSTORE_PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  log "creating .venv with $($PY --version 2>&1)"
  "$PY" -m venv .venv
fi
stamp=.venv/.embstore-requirements
want="$(cat requirements.txt requirements-nodeps.txt | sha256sum | cut -d' ' -f1)"
# The demo's few packages, at requirements.txt's pins.
demo_reqs="$(grep -E '^(numpy|nanobind|scikit-build-core)==' requirements.txt | sed 's/[[:space:]]*#.*//')"
demo_stamp=.venv/.embstore-demo-requirements
demo_want="$(echo "$demo_reqs" | sha256sum | cut -d' ' -f1)"
if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
  log "Python packages: up to date"
elif ((demo)) && [[ -f $demo_stamp && "$(cat "$demo_stamp")" == "$demo_want" ]]; then
  log "Python packages for the demo: up to date"
elif ((demo)); then
  log "installing the demo's Python packages into .venv: $(echo $demo_reqs)"
  # shellcheck disable=SC2086
  bash scripts/install_requirements.sh .venv $demo_reqs
  echo "$demo_want" >"$demo_stamp"
else
  log "installing Python packages from requirements.txt into .venv"
  bash scripts/install_requirements.sh .venv -r requirements.txt
  bash scripts/install_requirements.sh .venv --no-deps -r requirements-nodeps.txt
  echo "$want" >"$stamp"
fi

# --- The embstore Python package ------------------------------------------------------------------
# An editable install whose native module is built from this tree's CMake (build/python/...;
# scripts/install_package.sh).
# scripts/test.sh refreshes it after every C++ build (and sets EMBSTORE_SETUP_SKIP_PACKAGE=1 so
# that a failure there is reported as its own suite); here it is only installed when missing.
if ((demo)); then
  # The demo's CLI and the package's native module, both from one tree (build/release): the C++
  # sources compile once, tests and benchmarks not at all.
  log "building the embstore CLI and Python package in build/release (first time: a few minutes)"
  EMBSTORE_PACKAGE_TREE=release bash scripts/install_package.sh .venv
elif [[ "${EMBSTORE_SETUP_SKIP_PACKAGE:-0}" == 1 ]]; then
  log "embstore Python package: left to the caller"
elif ! .venv/bin/python -c "import embstore._native" >/dev/null 2>&1; then
  log "building and installing the embstore Python package into .venv (first time: a few minutes)"
  bash scripts/install_package.sh .venv
else
  log "embstore Python package: installed"
fi

# --- The TensorFlow 2.15 test environment ----------------------------------------------------------
# .venv-tf215: tf.estimator and Keras 2, for tests/python_tf215 (scripts/setup_tf215.sh).
# EMBSTORE_SETUP_SKIP_TF215=1 leaves it out (scripts/test.sh sets it and runs it as its own step).
if ((demo)) || [[ "${EMBSTORE_SETUP_SKIP_TF215:-0}" == 1 ]]; then
  log "TensorFlow 2.15 environment: left to the caller"
else
  bash scripts/setup_tf215.sh
fi
