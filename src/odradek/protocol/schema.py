"""``FieldSpec``: the description of one field that every generated class carries.

Generated classes expose ``FIELDS``, a tuple of these, so that tools and tests can
walk any message generically (the property tests build valid values for a version
from it) without parsing Kafka's JSON at run time.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class FieldSpec(NamedTuple):
    name: str
    """The Python attribute name (Kafka's name in snake case)."""
    type: str
    """The element type: a primitive name (``int32``, ``string``, ...) or a struct name."""
    is_array: bool
    struct: Any
    """The generated class of a struct field, else None."""
    versions: tuple[int, int] | None
    nullable_versions: tuple[int, int] | None
    tag: int | None
    ignorable: bool

    def present_in(self, version: int) -> bool:
        return self.versions is not None and self.versions[0] <= version <= self.versions[1]

    def nullable_in(self, version: int) -> bool:
        nv = self.nullable_versions
        return nv is not None and nv[0] <= version <= nv[1]
