"""``invariant()``: the one way to state a rule that only a bug can break."""

from __future__ import annotations

from odradek.core.errors import InvariantError


def invariant(condition: bool, message: str) -> None:
    """Raise :class:`InvariantError` when ``condition`` is false.

    Unlike ``assert`` this is never compiled away: a broken invariant must stop the
    process loudly rather than let it serve wrong data.
    """
    if not condition:
        raise InvariantError(message)
