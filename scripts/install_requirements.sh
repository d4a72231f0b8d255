#!/usr/bin/env bash
# Installs requirement files into a virtual environment, then compiles every module of it to
# bytecode on all cores. pip's own bytecode pass is one process (minutes for TensorFlow and
# PyTorch); skipping it altogether is worse: where PYTHONDONTWRITEBYTECODE is set (CI machines
# often set it) nothing is ever cached and each `import tensorflow` compiles it again (about 20 s
# instead of 7 s, for every test process). scripts/setup.sh and scripts/setup_tf215.sh call it.
# Usage: scripts/install_requirements.sh VENV [pip install arguments...]
set -euo pipefail
venv="$1"
shift
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-compile "$@"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# Some packages ship files that are not Python 3 (templates, test data): compileall reports them
# and exits 1, as pip ignores them. Python compiles what it imports on import, so that is fine.
"$venv/bin/python" -m compileall -q -j0 "$site" >/dev/null 2>&1 || true
