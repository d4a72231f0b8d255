# Sourced (not run) by scripts/install_package.sh and scripts/wheel.sh, after they set ROOT:
# where and how pip builds the package's native code (the extension and the `embstore` CLI).
#
# By default python/pyproject.toml decides: Release, in build/python/<wheel tag>.
# EMBSTORE_PACKAGE_TREE=dev builds it in the dev preset's tree instead (build/dev:
# RelWithDebInfo, tests and benchmarks configured, warnings as errors, as scripts/build.sh dev
# configures it), so that scripts/test.sh compiles the C++ sources once for ctest, the package
# and the wheel, not three times. Installed files are stripped either way.
package_settings=()
case "${EMBSTORE_PACKAGE_TREE:-}" in
  "") ;;
  dev)
    package_settings=(
      --config-settings=build-dir="$ROOT/build/dev"
      --config-settings=cmake.build-type=RelWithDebInfo
      --config-settings=cmake.define.EMBSTORE_BUILD_TESTS=ON
      --config-settings=cmake.define.EMBSTORE_BUILD_BENCH=ON
      --config-settings=cmake.define.EMBSTORE_WERROR=ON
      --config-settings=install.strip=true
    )
    ;;
  *)
    echo "EMBSTORE_PACKAGE_TREE='${EMBSTORE_PACKAGE_TREE}': expected 'dev' or nothing" >&2
    exit 2
    ;;
esac
