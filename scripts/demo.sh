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

bash scripts/setup.sh
bash scripts/build.sh release
EMB="$ROOT/build/release/cli/embstore"
PY="$ROOT/.venv/bin/python"
mkdir -p demo
rm -f demo/sample.emb demo/pulled.npy demo/exported.npy demo/exported.keys

step() { echo; echo "== $*"; }

step "generate demo/sample.vec ($rows x $dim, word2vec text)"
"$PY" scripts/make_sample.py demo/sample.vec --rows "$rows" --dim "$dim"
ls -l demo/sample.vec

step "convert to a table file"
"$EMB" convert demo/sample.vec demo/sample.emb --meta demo=yes

step "inspect"
"$EMB" inspect demo/sample.emb --keys 3

step "verify every checksum block"
"$EMB" verify demo/sample.emb

step "export back to .npy and compare with the text"
"$EMB" export demo/sample.emb demo/exported.npy --keys demo/exported.keys
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
