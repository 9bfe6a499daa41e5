"""Running the ``pairwise`` command line in-process for its usage errors."""

from __future__ import annotations

from pairwise.cli import main


def cli_error(capsys, argv) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err
