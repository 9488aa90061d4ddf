"""``python -m odradek``: the same as the ``odradek`` command."""

from odradek.cli.main import main

main()
