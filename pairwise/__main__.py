"""``python -m pairwise``: the same as the ``pairwise`` command."""

import sys

from pairwise.cli import main

if __name__ == "__main__":
    sys.exit(main())
