# Sourced (not run) by scripts/wheel.sh and scripts/test-wheels.sh.
# find_python V: prints the path of a CPython V (3.9, 3.12, ...) interpreter of this machine,
# `pythonV` on PATH or pyenv's ~/.pyenv/versions/V.*; status 1 when there is none.
find_python() {
  local v="$1" p
  for p in "python$v" "$HOME"/.pyenv/versions/"$v".*/bin/"python$v"; do
    if command -v "$p" >/dev/null 2>&1 &&
      "$p" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" 2>/dev/null; then
      command -v "$p"
      return 0
    fi
  done
  return 1
}
