"""``python -m pairwise.commands.ecdf ARGS``: the same as ``pairwise ecdf ARGS``."""

import sys

from pairwise.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(["ecdf", *sys.argv[1:]]))
