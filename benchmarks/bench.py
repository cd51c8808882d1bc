"""The benchmark as a script: same as `extrapolate bench` (run from the repository root)."""

import sys

from extrapolate.cli.app import app

if __name__ == "__main__":
    sys.exit(app(["bench", *sys.argv[1:]]))
