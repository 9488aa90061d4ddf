"""The optional dependencies (pyproject's extras) and what to say when one is missing.

A command that needs an extra imports it through :func:`needs_extra`, so that a plain
``pip install odradek`` gets one line naming the extra to install instead of a
``ModuleNotFoundError`` traceback. ``odradek``'s group catches the same error from any
command as a last resort (``cli/main.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

import click

EXTRA_OF_MODULE: Final = {
    # odradek verify: real Kafka clients for its workload, matplotlib for its timeline.
    "confluent_kafka": "verify",
    "matplotlib": "verify",
}
"""The top-level module of each optional dependency, and the extra that installs it
(``[project.optional-dependencies]`` in pyproject.toml)."""


class ExtraMissing(click.ClickException):
    exit_code = 1


def missing_extra(error: ModuleNotFoundError, command: str) -> ExtraMissing | None:
    """The one-line error for a module of an extra that is not installed; None when the
    missing module is no extra's (a broken installation, or a bug: let it be seen)."""
    module = (error.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return ExtraMissing(
        f"{command} needs the {extra!r} extra, which is not installed (no module "
        f"{module}): pip install 'odradek[{extra}]' (from a source checkout: "
        f"pip install -e '.[{extra}]')"
    )


@contextlib.contextmanager
def needs_extra(command: str) -> Iterator[None]:
    """Turn a missing extra's ModuleNotFoundError in the block into :class:`ExtraMissing`."""
    try:
        yield
    except ModuleNotFoundError as e:
        missing = missing_extra(e, command)
        if missing is None:
            raise
        raise missing from None
