#!/usr/bin/env bash
# Sets up, builds (dev preset) and runs every test suite: C++ through ctest (with a real S3
# server, built by scripts/s3-server.sh, and a real HDFS, scripts/hdfs-server.sh), the fuzz smoke
# runs, Python through pytest in .venv (TensorFlow 2.21, Keras 3, PyTorch), then the
# TensorFlow suites again in .venv-tf215 (TensorFlow 2.15 with tf.estimator, Keras 2, numpy 1.x),
# then the portable wheels where their libraries are cached (the step "portable wheels" below).
# Every suite runs even when an earlier one fails; the script ends with a summary of each suite
# and exits non-zero if any failed. Extra arguments go to the first pytest run.
# EMBSTORE_SKIP_FUZZ=1 skips the fuzz smoke runs.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# The Python package (both environments) and the wheel test build their native code in
# build/dev, the tree ctest uses, so the C++ sources compile once (scripts/package_settings.sh).
export EMBSTORE_PACKAGE_TREE="${EMBSTORE_PACKAGE_TREE-dev}"

declare -a names=() results=() seconds=()
# run NAME COMMAND...: runs one step, records whether it passed and how long it took, never
# stops the script.
run() {
  local name="$1" start=$SECONDS
  shift
  echo "test: == $name"
  if "$@"; then
    results+=("passed")
  else
    results+=("FAILED (exit $?)")
  fi
  names+=("$name")
  seconds+=("$((SECONDS - start)) s")
}
# not_run NAME WHY: records a step that could not run as failed.
not_run() { names+=("$1"); results+=("FAILED (not run: $2)"); seconds+=("-"); }
summary() {
  local failed=0
  echo
  echo "test: summary (${SECONDS} s in all)"
  for i in "${!names[@]}"; do
    printf 'test:   %-28s %-8s %s\n' "${names[$i]}" "${seconds[$i]}" "${results[$i]}"
    [[ ${results[$i]} == passed* ]] || failed=1
  done
  return $failed
}
step_ok() { [[ ${results[-1]} == passed ]]; }

run "setup" env EMBSTORE_SETUP_SKIP_PACKAGE=1 EMBSTORE_SETUP_SKIP_TF215=1 bash scripts/setup.sh
if ! step_ok; then summary; exit 1; fi  # nothing can build without the packages

# The TF 2.15 environment's packages (first run: a download of about 280 MB, unpacked and
# compiled to bytecode) install in the background while the C++ tree compiles; the step
# "TF 2.15 environment" below waits for them and prints what they printed.
tf215_log="$(mktemp)"
EMBSTORE_SETUP_SKIP_PACKAGE=1 bash scripts/setup_tf215.sh >"$tf215_log" 2>&1 &
tf215_pid=$!

# The S3 test server (SeaweedFS, scripts/s3-server.sh) builds in the background too, once: the
# first run fetches a Go toolchain and the module (about 140 MB) and compiles for some minutes;
# later runs find the binary under build/tools/ and Go's caches warm. Tests against it fail,
# rather than skip, when it is missing (EMBSTORE_REQUIRE_S3).
export EMBSTORE_REQUIRE_S3=1
s3_log="$(mktemp)"
bash scripts/s3-server.sh --build >"$s3_log" 2>&1 &
s3_pid=$!

# The HDFS test cluster (a MiniDFSCluster from Hadoop's jars, scripts/hdfs-server.sh) too: the
# first run fetches the jars from Maven Central into a cache outside the checkout; tests against
# it fail, rather than skip, when it is missing (EMBSTORE_REQUIRE_HDFS).
export EMBSTORE_REQUIRE_HDFS=1
hdfs_log="$(mktemp)"
bash scripts/hdfs-server.sh --build >"$hdfs_log" 2>&1 &
hdfs_pid=$!

run "build (dev preset)" bash scripts/build.sh dev
built=0
step_ok && built=1

# background_step PID LOG: waits for a build started in the background, prints its log.
background_step() {
  local rc=0
  wait "$1" || rc=$?
  cat "$2"
  rm -f "$2"
  return $rc
}
run "S3 test server" background_step "$s3_pid" "$s3_log"
run "HDFS test cluster" background_step "$hdfs_pid" "$hdfs_log"

if ((built)); then
  run "ctest" ctest --preset dev
else
  not_run "ctest" "the build failed"
fi

fuzz_smoke() {
  # Bounded libFuzzer runs under ASan+UBSan of the converter's parser (docs/CONVERT.md) and of
  # the table reader (docs/FORMAT.md).
  if [[ ! -f build/fuzz/build.ninja ]]; then
    CC=clang CXX=clang++ cmake --preset asan -B build/fuzz -DEMBSTORE_BUILD_FUZZ=ON >/dev/null ||
      return 1
  fi
  cmake --build build/fuzz --target convert_fuzz table_fuzz &&
    ctest --test-dir build/fuzz -j2 -R "convert_fuzz_smoke|table_fuzz_smoke" --output-on-failure
}
if [[ "${EMBSTORE_SKIP_FUZZ:-0}" == 1 ]]; then
  names+=("fuzz smoke"); results+=("passed (skipped: EMBSTORE_SKIP_FUZZ=1)"); seconds+=("-")
else
  run "fuzz smoke (clang, ASan)" fuzz_smoke
fi

# The package's native module and CLI, rebuilt from this tree after every C++ change, in the dev
# tree just built (EMBSTORE_PACKAGE_TREE, exported above): only the binding layer compiles.
run "python package" bash scripts/install_package.sh .venv
# The second environment: its packages (installed in the background since the build) and the
# package's native module installed into it (built in build/dev, as the step above).
tf215_environment() {
  local rc=0
  wait "$tf215_pid" || rc=$?
  cat "$tf215_log"
  rm -f "$tf215_log"
  ((rc == 0)) && bash scripts/setup_tf215.sh --package
}
run "TF 2.15 environment" tf215_environment
tf215_ready=0
step_ok && tf215_ready=1

# Its suite (tests/python_tf215: tf.estimator, Keras 2; and the files of tests/python that
# exercise TensorFlow) runs in the background beside the main pytest run: both are mostly
# single-threaded Python waiting on subprocesses, so together they take about the longer one's
# time on two cores, not the sum. Each has its own temporary root; the output is printed whole
# when it ends.
if ((tf215_ready)); then
  tf215_out="$(mktemp)"
  tf215_tmp="$(mktemp -d)"
  tf215_start=$SECONDS
  EMBSTORE_BUILD_DIR="$ROOT/build/dev" .venv-tf215/bin/python -m pytest --basetemp="$tf215_tmp/t" \
    tests/python_tf215 tests/python/test_python_tf.py tests/python/test_python_tf_keras2.py \
    tests/python/test_python_tf_restart.py tests/python/test_python_tf_distributed.py \
    tests/python/test_examples.py tests/python/test_save_tf.py >"$tf215_out" 2>&1 &
  tf215_test_pid=$!
fi

# The portable (manylinux_2_28) wheels: their static libraries (gRPC, protobuf, OpenSSL, ...,
# scripts/portable-deps.sh) take about an hour per target to build cold, more than a test run
# can spend, so this step runs where both targets' caches are warm and is skipped otherwise
# (scripts/wheel.sh builds them). A representative part of the matrix: the x86_64 cp39 wheel
# checked in a Debian 11 root (glibc 2.31, Python 3.9), the aarch64 cp311 wheel in a Debian 12
# arm64 root under qemu, and the NEON kernel tests there (scripts/test-wheels.sh --roots). It
# runs beside pytest at the lowest CPU priority, so it takes what pytest leaves idle. The full
# matrix is `bash scripts/wheel.sh && bash scripts/test-wheels.sh` (docs/PYTHON.md, "Installing").
portable_ready=0
if bash scripts/portable-deps.sh --where x86_64 >/dev/null 2>&1 &&
  bash scripts/portable-deps.sh --where aarch64 >/dev/null 2>&1; then
  portable_ready=1
  portable_out="$(mktemp -d)"
  portable_log="$(mktemp)"
  portable_start=$SECONDS
  nice -n 19 bash -c 'bash scripts/wheel.sh --target x86_64 --python 3.9 "$1" &&
    bash scripts/wheel.sh --target aarch64 --python 3.11 "$1" &&
    bash scripts/test-wheels.sh --roots "$1"' portable "$portable_out" >"$portable_log" 2>&1 &
  portable_pid=$!
fi

# pytest runs even when the package or the C++ build failed: the suites that do not need them
# still say something, and the failures name what is missing.
run "pytest" env EMBSTORE_BUILD_DIR="$ROOT/build/dev" .venv/bin/python -m pytest tests/python "$@"

tf215_pytest() {
  local rc=0
  wait "$tf215_test_pid" || rc=$?
  cat "$tf215_out"
  echo "test: the TensorFlow 2.15 suite started $((SECONDS - tf215_start)) s ago, beside the pytest" \
    "step (its own time is in its last line above)"
  rm -rf "$tf215_out" "$tf215_tmp"
  return $rc
}
if ((tf215_ready)); then
  run "pytest (TensorFlow 2.15)" tf215_pytest
else
  not_run "pytest (TensorFlow 2.15)" "no .venv-tf215"
fi

portable_wheels() {
  local rc=0
  wait "$portable_pid" || rc=$?
  cat "$portable_log"
  echo "test: the portable wheels started $((SECONDS - portable_start)) s ago, beside pytest"
  rm -rf "$portable_out" "$portable_log"
  return $rc
}
if ((portable_ready)); then
  run "portable wheels" portable_wheels
else
  names+=("portable wheels")
  results+=("passed (skipped: no cached portable libraries; scripts/portable-deps.sh builds them)")
  seconds+=("-")
fi

summary
