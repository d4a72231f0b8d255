"""The `embstore` command of a pip installation: runs the C++ CLI shipped inside the package
(embstore/bin/embstore), the same program as the one built from the source tree.

A top-level module, not part of the `embstore` package: importing anything in the package runs
embstore/__init__.py, which loads numpy and the native module (about 0.1 s), and every
`embstore` command line (a readiness probe's `embstore health` among them) would pay that
before the program starts. This finds the package's directory without importing it."""
import importlib.util
import os
import sys


def _binary():
    spec = importlib.util.find_spec("embstore")
    if spec is None or not spec.submodule_search_locations:
        return None
    # An editable development install (scripts/setup.sh) has two: the source tree's package and
    # the installed files, the CLI among them; failing that, the source tree's own builds.
    places = [os.path.abspath(p) for p in spec.submodule_search_locations]
    candidates = [os.path.join(here, "bin", "embstore") for here in places]
    candidates += [os.path.join(os.path.dirname(os.path.dirname(here)), "build", preset, "cli",
                                "embstore") for here in places for preset in ("release", "dev")]
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    return None


def main():
    path = _binary()
    if path is None:
        sys.stderr.write("embstore: the embstore program is not part of this installation "
                         "(looked in the package's bin/ directory); install the wheel, or build it "
                         "with scripts/build.sh\n")
        return 127
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
