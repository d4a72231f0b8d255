#!/usr/bin/env bash
# The main job on a built-in default: generate a sample word2vec text file, convert it into a
# table, inspect and verify it, serve it over gRPC, pull it back, and check the values against the
# text. Everything lands in demo/ (ignored by git).
# Usage: scripts/demo.sh [--rows N] [--dim D]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
rows=20000
dim=64
while (($#)); do
  case "$1" in
    --rows) rows="$2"; shift 2 ;;
    --dim) dim="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

# Only what the job needs: the Debian build packages, numpy, and the CLI and the Python package
# compiled once in build/release (scripts/setup.sh --demo); no test environments or targets.
bash scripts/setup.sh --demo
EMB="$ROOT/build/release/cli/embstore"
PY="$ROOT/.venv/bin/python"
mkdir -p demo
rm -rf demo/store demo/pulled.npy demo/exported.npy demo/exported.keys demo/embstore.sock
mkdir -p demo/store

step() { echo; echo "== $*"; }

step "generate demo/sample.vec ($rows x $dim, word2vec text)"
"$PY" scripts/make_sample.py demo/sample.vec --rows "$rows" --dim "$dim"
ls -l demo/sample.vec

step "convert to a table file"
"$EMB" convert demo/sample.vec demo/store/sample.emb --meta demo=yes

step "inspect"
"$EMB" inspect demo/store/sample.emb --keys 3

step "verify every checksum block"
"$EMB" verify demo/store/sample.emb

step "export back to .npy and compare with the text"
"$EMB" export demo/store/sample.emb demo/exported.npy --keys demo/exported.keys
"$PY" - <<'PY'
import numpy as np
text = np.loadtxt("demo/sample.vec", skiprows=1, usecols=None, dtype=str)
want = text[:, 1:].astype(np.float32)
got = np.load("demo/exported.npy")
keys = open("demo/exported.keys", encoding="utf-8").read().split("\n")[:-1]
assert got.shape == want.shape, (got.shape, want.shape)
assert np.array_equal(got, want), "values differ"
assert keys == list(text[:, 0]), "keys differ"
print(f"demo: {got.shape[0]} x {got.shape[1]} values and keys identical to the text file")
PY

step "serve demo/store over gRPC (unix socket and loopback TCP)"
port="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$EMB" serve --store demo/store --listen "unix:$ROOT/demo/embstore.sock" --listen "127.0.0.1:$port" \
  --log-level warn &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -S demo/embstore.sock ]] && break; sleep 0.1; done
"$EMB" ls --from "127.0.0.1:$port"

step "pull it back over TCP with 4 verified streams"
"$EMB" pull --from "127.0.0.1:$port" --table sample --out demo/pulled.npy --streams 4 --no-local

step "load it from Python, as a trainer would"
"$PY" - "127.0.0.1:$port" <<'PY'
import sys
import numpy as np
import embstore
target = sys.argv[1]
m = embstore.load(target, "sample", local=False)
pulled = np.load("demo/pulled.npy")
text = np.loadtxt("demo/sample.vec", skiprows=1, usecols=range(1, m.shape[1] + 1), dtype=np.float32)
assert np.array_equal(m, text) and np.array_equal(pulled, text)
vocab = ["token7", "unknown-word", "token3"]
rows = embstore.load(target, "sample", keys=vocab, missing="zeros")
print(f"demo: embstore.load({target!r}, 'sample') -> {m.shape} {m.dtype}, "
      f"64-byte aligned: {m.ctypes.data % 64 == 0}; pulled .npy identical")
print(f"demo: keys {vocab} -> rows of shape {rows.shape}; the unknown word got zeros: "
      f"{not rows[1].any()}")
PY
echo
echo "demo: done. Files are in demo/; examples/ shows TensorFlow and PyTorch use."
