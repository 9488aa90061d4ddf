"""Entry points: the ``odradek`` command, config files, human output."""
