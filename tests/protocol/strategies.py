"""Hypothesis strategies that build a valid value of any generated class for a version.

They read the ``FIELDS`` table each generated class carries, so a new schema needs no
new test code: a field absent from a version keeps its default, a field nullable in
a version is sometimes null, and flexible versions carry unknown tagged fields that
must survive a round trip.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from odradek.protocol.schema import FieldSpec

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _scalar(type_name: str) -> st.SearchStrategy[Any]:
    if type_name in _INT_RANGES:
        lo, hi = _INT_RANGES[type_name]
        return st.integers(lo, hi)
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "string":
        return st.text(max_size=12)
    if type_name in ("bytes", "records"):
        return st.binary(max_size=24)
    if type_name == "uuid":
        return st.uuids()
    raise AssertionError(f"no strategy for {type_name}")


def field_value(spec: FieldSpec, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    elem: st.SearchStrategy[Any]
    if spec.struct is not None:
        elem = struct_value(spec.struct, version, flexible)
    else:
        elem = _scalar(spec.type)
    value = st.lists(elem, max_size=3) if spec.is_array else elem
    if spec.nullable_in(version):
        value = st.none() | value
    return value


def _unknown_tags(cls: Any, version: int) -> st.SearchStrategy[list[tuple[int, bytes]]]:
    known = {f.tag for f in cls.FIELDS if f.tag is not None}
    tags = st.lists(st.integers(0, 40).filter(lambda t: t not in known), max_size=2, unique=True)
    return tags.flatmap(
        lambda ts: st.tuples(*(st.tuples(st.just(t), st.binary(max_size=6)) for t in sorted(ts)))
    ).map(list)


def struct_value(cls: Any, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for spec in cls.FIELDS:
        if spec.present_in(version):
            kwargs[spec.name] = _deferred(spec, version, flexible)
    if flexible and "unknown_tagged_fields" in cls.__dataclass_fields__:
        kwargs["unknown_tagged_fields"] = _unknown_tags(cls, version)
    return st.builds(cls, **kwargs)


def _deferred(spec: FieldSpec, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    # Deferred so that recursive structs are only built when drawn.
    return st.deferred(lambda: field_value(spec, version, flexible))


def message_value(cls: Any, version: int) -> st.SearchStrategy[Any]:
    fv = cls.FLEXIBLE_VERSION
    return struct_value(cls, version, fv is not None and version >= fv)
