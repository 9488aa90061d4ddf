"""``python -m odradek``: the same as the ``odradek`` command."""

from odradek.cli.main import main

if __name__ == "__main__":
    main()
