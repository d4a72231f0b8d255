"""The `embstore` command of a pip installation: runs the C++ CLI shipped inside the package
(embstore/bin/embstore), the same program as the one built from the source tree."""
import os
import sys


def _binary():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "bin", "embstore")]
    # An editable development install (scripts/setup.sh) keeps its binaries in the build tree.
    root = os.path.dirname(os.path.dirname(here))
    candidates += [os.path.join(root, "build", preset, "cli", "embstore")
                   for preset in ("release", "dev")]
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
