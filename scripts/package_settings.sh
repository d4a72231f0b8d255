# Sourced (not run) by scripts/install_package.sh and scripts/wheel.sh, after they set ROOT:
# where and how pip builds the package's native code (the extension and the `embstore` CLI).
#
# By default python/pyproject.toml decides: Release, in build/python/<wheel tag>.
# EMBSTORE_PACKAGE_TREE=dev builds it in the dev preset's tree instead (build/dev:
# RelWithDebInfo, tests and benchmarks configured, warnings as errors, as scripts/build.sh dev
# configures it), so that scripts/test.sh compiles the C++ sources once for ctest, the package
# and the wheel, not three times. EMBSTORE_PACKAGE_TREE=release builds it in build/release
# without tests and benchmarks (Release, warnings as errors): the demo's tree, where its CLI
# (build/release/cli/embstore) comes from the same compile. Installed files are stripped always.
package_settings=()
case "${EMBSTORE_PACKAGE_TREE:-}" in
  "") ;;
  dev | release)
    tree="$ROOT/build/$EMBSTORE_PACKAGE_TREE"
    if [[ $EMBSTORE_PACKAGE_TREE == dev ]]; then
      package_settings=(
        --config-settings=cmake.build-type=RelWithDebInfo
        --config-settings=cmake.define.EMBSTORE_BUILD_TESTS=ON
        --config-settings=cmake.define.EMBSTORE_BUILD_BENCH=ON)
    else
      package_settings=(
        --config-settings=cmake.build-type=Release
        --config-settings=cmake.define.EMBSTORE_BUILD_TESTS=OFF
        --config-settings=cmake.define.EMBSTORE_BUILD_BENCH=OFF)
    fi
    package_settings+=(
      --config-settings=build-dir="$tree"
      --config-settings=cmake.define.EMBSTORE_WERROR=ON
      --config-settings=install.strip=true
    )
    # scikit-build-core clears a tree's CMake cache when another environment builds in it (.venv,
    # then .venv-tf215) and configures it afresh with Python's idea of the compiler (sysconfig's
    # CXX: "g++", "x86_64-linux-gnu-g++"): every compile command changes and the whole tree
    # recompiles. The compilers the tree was configured with are handed over instead.
    if [[ -f $tree/CMakeCache.txt ]]; then
      cached_cc="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$tree/CMakeCache.txt")"
      cached_cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$tree/CMakeCache.txt")"
      if [[ -n $cached_cc && -n $cached_cxx ]]; then
        export CC="${CC:-$cached_cc}" CXX="${CXX:-$cached_cxx}"
      fi
    fi
    ;;
  *)
    echo "EMBSTORE_PACKAGE_TREE='${EMBSTORE_PACKAGE_TREE}': expected 'dev', 'release' or nothing" >&2
    exit 2
    ;;
esac
