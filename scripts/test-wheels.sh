#!/usr/bin/env bash
# Installs the portable wheels that scripts/wheel.sh built and checks each one where users run
# it: tests/wheel/check_wheel.py (the CLI, every parse kernel against the scalar reference, loads
# from a file and from a server) in a fresh virtual environment with numpy from PyPI.
#
# Usage: scripts/test-wheels.sh [--roots] [--host] [DIST]      DIST: default dist/
#   --host    every x86_64 wheel in a fresh venv of its CPython on this machine (the cp312-abi3
#             wheel on 3.12 and 3.13); this machine's system gRPC, protobuf and abseil are not
#             used (the check reads the process's mappings and the binaries' needed libraries).
#   --roots   the cp39 x86_64 wheel inside a Debian 11 root (its own python3.9, glibc 2.31, no
#             gRPC, protobuf or abseil installed), and the aarch64 cp311 wheel inside a Debian 12
#             arm64 root under qemu (the NEON kernels against the scalar reference there).
#   Neither: both.
#   --target T    only T's wheels and roots (x86_64 or aarch64; repeatable); default: both.
# The roots are made once with debootstrap (a minute or two each, from the Debian mirror) and
# kept under $EMBSTORE_CACHE (default ~/.cache/embstore)/roots/. Needs root, debootstrap,
# qemu-user-static and binfmt-support (scripts/debian-packages.txt).
# Prints one line per wheel and environment, then a summary; exits non-zero if any failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${EMBSTORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/embstore}"
MIRROR="${EMBSTORE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
log() { echo "test-wheels: $*"; }
die() { echo "test-wheels: $*" >&2; exit 1; }
usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

host=0
roots=0
dist=""
targets=()
while (($#)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --host) host=1 ;;
    --roots) roots=1 ;;
    --target)
      [[ ${2:-} == x86_64 || ${2:-} == aarch64 ]] || die "--target takes x86_64 or aarch64 (got '${2:-}')"
      targets+=("$2"); shift ;;
    -*) usage >&2; exit 2 ;;
    *) dist="$1" ;;
  esac
  shift
done
((host || roots)) || { host=1; roots=1; }
((${#targets[@]})) || targets=(x86_64 aarch64)
wanted() { [[ " ${targets[*]} " == *" $1 "* ]]; }
dist="$(realpath -m "${dist:-$ROOT/dist}")"
CHECK="$ROOT/tests/wheel/check_wheel.py"

declare -a names=() results=()
record() { names+=("$1"); results+=("$2"); log "$1: $2"; }

# needed_ok WHEEL: every ELF file in the wheel needs only glibc's libraries.
needed_ok() {
  local tmp bad=""
  tmp="$(mktemp -d)"
  python3 -m zipfile -e "$1" "$tmp" >/dev/null
  while IFS= read -r f; do
    file -b "$f" | grep -q '^ELF' || continue
    while read -r lib; do
      case "$lib" in
        libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | libresolv.so.2 | ld-linux-*.so.* | ld-linux.so.*) ;;
        *) bad+=" ${f#"$tmp"/}:$lib" ;;
      esac
    done < <(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done < <(find "$tmp" -type f)
  rm -rf "$tmp"
  [[ -z $bad ]] || { log "$(basename "$1") needs libraries besides glibc's:$bad"; return 1; }
}

# check_in_venv PYTHON WHEEL: a fresh venv of PYTHON, the wheel and numpy, then the check.
check_in_venv() {
  local py="$1" wheel="$2" venv rc=0
  venv="$(mktemp -d -t embstore-wheel-venv-XXXXXX)"
  "$py" -m venv "$venv/env" &&
    "$venv/env/bin/pip" install --quiet --disable-pip-version-check "$wheel" numpy &&
    (cd / && env -u PYTHONPATH PATH="$venv/env/bin:$PATH" "$venv/env/bin/python" "$CHECK") || rc=1
  rm -rf "$venv"
  return $rc
}

source "$ROOT/scripts/find_python.sh"

shopt -s nullglob
wheels=()
for t in "${targets[@]}"; do wheels+=("$dist"/embstore-*-manylinux_2_28_"$t".whl); done
((${#wheels[@]})) || die "no manylinux_2_28 ${targets[*]} wheels in $dist (build them with scripts/wheel.sh)"

"$ROOT/.venv/bin/python" -m auditwheel --version >/dev/null 2>&1 ||
  die "no auditwheel in $ROOT/.venv (make the environment first: bash scripts/setup.sh)"

# Every wheel: auditwheel's verdict is manylinux_2_28 (no symbol newer than GLIBC_2.28), and its
# binaries need no library but glibc's.
for w in "${wheels[@]}"; do
  shown="$("$ROOT/.venv/bin/python" -m auditwheel show "$w" 2>&1 | tr -s ' \n' '  ')"  # unwrapped
  arch="${w##*manylinux_2_28_}"
  arch="${arch%.whl}"
  if grep -q "is consistent with the following platform tag: \"manylinux_2_28_$arch\"" <<<"$shown" &&
    needed_ok "$w"; then
    record "$(basename "$w"): auditwheel show, needed libraries" passed
  else
    echo "$shown"
    record "$(basename "$w"): auditwheel show, needed libraries" FAILED
  fi
done

if ((host)); then
  for w in "${wheels[@]}"; do
    name="$(basename "$w")"
    [[ $name == *_x86_64.whl ]] || continue
    tag="$(cut -d- -f3 <<<"$name")"  # cp39, cp310, cp311, cp312 (abi3)
    case "$name" in
      *-abi3-*) versions=(3.12 3.13) ;;
      *) versions=("3.${tag#cp3}") ;;
    esac
    for v in "${versions[@]}"; do
      if ! py="$(find_python "$v")"; then
        record "$name on this machine's CPython $v" "FAILED (no CPython $v here)"
        continue
      fi
      if check_in_venv "$py" "$w" >"$CACHE/last-check.log" 2>&1; then
        record "$name on CPython $v" "passed ($(grep -c '^check_wheel:' "$CACHE/last-check.log") checks)"
      else
        cat "$CACHE/last-check.log"
        record "$name on CPython $v" FAILED
      fi
    done
  done
fi

# make_root NAME SUITE ARCH: a Debian root with python3 and venv, cached.
make_root() {
  local name="$1" suite="$2" arch="$3" dir="$CACHE/roots/$1"
  [[ -f $dir/.complete ]] && { echo "$dir"; return 0; }
  command -v debootstrap >/dev/null || die "debootstrap is missing (scripts/debian-packages.txt)"
  rm -rf "$dir"
  mkdir -p "$dir"
  local foreign=()
  [[ $arch != amd64 ]] && foreign=(--foreign)
  log "making the $suite $arch root $dir (debootstrap; a minute or two)" >&2
  debootstrap "${foreign[@]}" --arch="$arch" --variant=minbase \
    --include=python3,python3-venv,ca-certificates "$suite" "$dir" "$MIRROR" >"$dir.log" 2>&1 ||
    { tail -20 "$dir.log" >&2; die "debootstrap $suite $arch failed"; }
  if ((${#foreign[@]})); then
    enable_qemu
    cp /usr/bin/qemu-aarch64-static "$dir/usr/bin/"
    chroot "$dir" /debootstrap/debootstrap --second-stage >>"$dir.log" 2>&1 ||
      { tail -20 "$dir.log" >&2; die "debootstrap's second stage in the $arch root failed"; }
  fi
  touch "$dir/.complete"
  echo "$dir"
}

enable_qemu() {
  [[ -e /proc/sys/fs/binfmt_misc/register ]] ||
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc"
  [[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] || update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 ||
    die "cannot register qemu for aarch64 programs (qemu-user-static, binfmt-support)"
}

# check_in_root DIR WHEEL: the wheel and numpy into a venv of the root's own python3, then the
# check, with the root's /proc and /dev from the host.
check_in_root() {
  local dir="$1" wheel="$2" rc=0
  # The host's name servers and trusted CAs (a proxy's CA among them, where PyPI is reached
  # through one), so pip in the root reaches PyPI as the host does.
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  [[ -f /etc/ssl/certs/ca-certificates.crt ]] &&
    cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
  mkdir -p "$dir/tmp/wheel"
  rm -rf "$dir/tmp/wheel/"*
  cp "$wheel" "$CHECK" "$dir/tmp/wheel/"
  mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
  mountpoint -q "$dir/dev" || mount --bind /dev "$dir/dev"
  chroot "$dir" /bin/sh -c "cd /tmp/wheel && rm -rf env && python3 -m venv env &&
    env/bin/pip install --quiet --disable-pip-version-check ./$(basename "$wheel") numpy &&
    cd / && PATH=/tmp/wheel/env/bin:/usr/bin:/bin /tmp/wheel/env/bin/python /tmp/wheel/check_wheel.py" || rc=1
  umount "$dir/dev" "$dir/proc" 2>/dev/null
  return $rc
}

if ((roots)); then
  pick() { local w; for w in "${wheels[@]}"; do [[ $(basename "$w") == $1 ]] && { echo "$w"; return 0; }; done; return 1; }
  if ! wanted x86_64; then
    :
  elif w="$(pick 'embstore-*-cp39-cp39-manylinux_2_28_x86_64.whl')"; then
    if dir="$(make_root bullseye-amd64 bullseye amd64)" && check_in_root "$dir" "$w" >"$CACHE/last-check.log" 2>&1; then
      record "$(basename "$w") in Debian 11 (glibc $(chroot "$dir" ldd --version | head -1 | awk '{print $NF}'))" \
        "passed ($(grep -c '^check_wheel:' "$CACHE/last-check.log") checks)"
    else
      cat "$CACHE/last-check.log"
      record "$(basename "$w") in Debian 11" FAILED
    fi
  else
    record "cp39 x86_64 wheel in Debian 11" "FAILED (no such wheel in $dist)"
  fi
  if ! wanted aarch64; then
    :
  elif w="$(pick 'embstore-*-cp311-cp311-manylinux_2_28_aarch64.whl')"; then
    enable_qemu
    if dir="$(make_root bookworm-arm64 bookworm arm64)" && check_in_root "$dir" "$w" >"$CACHE/last-check.log" 2>&1; then
      record "$(basename "$w") in a Debian 12 arm64 root under qemu" \
        "passed ($(grep -c '^check_wheel:' "$CACHE/last-check.log") checks)"
      grep -E 'kernels|identical' "$CACHE/last-check.log"
    else
      cat "$CACHE/last-check.log"
      record "$(basename "$w") in the arm64 root" FAILED
    fi
  else
    record "cp311 aarch64 wheel in the arm64 root" "FAILED (no such wheel in $dist)"
  fi
  # The C++ kernel tests built for aarch64 (the NEON parse and dtype kernels against the scalar
  # reference, store/src/dtype_test.cc and convert/src/parse_kernel_test.cc), run under qemu with
  # the arm64 root's glibc.
  if ! wanted aarch64; then
    :
  elif prefix="$(bash "$ROOT/scripts/portable-deps.sh" --where aarch64)" &&
    dir="$(make_root bookworm-arm64 bookworm arm64)"; then
    # One tree per checkout: CMake refuses a build tree made from another source folder.
    build="$CACHE/portable/test-build/aarch64-$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"
    emu="$(command -v qemu-aarch64-static)"
    if cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_TOOLCHAIN_FILE="$prefix/toolchain.cmake" -DEMBSTORE_BUILD_TESTS=ON \
      -DEMBSTORE_BUILD_BENCH=OFF -DEMBSTORE_WERROR=ON \
      "-DCMAKE_CROSSCOMPILING_EMULATOR=$emu;-L;$dir" >"$CACHE/last-check.log" 2>&1 &&
      cmake --build "$build" --target store_test convert_test >>"$CACHE/last-check.log" 2>&1 &&
      "$emu" -L "$dir" "$build/store/store_test" --gtest_brief=1 --gtest_filter='DType*:Simd*' \
        >>"$CACHE/last-check.log" 2>&1 &&
      "$emu" -L "$dir" "$build/convert/convert_test" --gtest_brief=1 \
        --gtest_filter='KernelVsScalar*:ScalarKernel*:Utf8*' >>"$CACHE/last-check.log" 2>&1; then
      record "aarch64 kernel tests (store_test, convert_test) under qemu" \
        "passed ($(grep -h 'tests from .* ran' "$CACHE/last-check.log" | awk '{s += $2} END {print s}') tests)"
    else
      tail -40 "$CACHE/last-check.log"
      record "aarch64 kernel tests under qemu" FAILED
    fi
  else
    record "aarch64 kernel tests under qemu" "FAILED (no aarch64 libraries: scripts/portable-deps.sh aarch64)"
  fi
fi

echo
echo "test-wheels: summary"
failed=0
for i in "${!names[@]}"; do
  printf 'test-wheels:   %-70s %s\n' "${names[$i]}" "${results[$i]}"
  [[ ${results[$i]} == passed* ]] || failed=1
done
exit $failed
