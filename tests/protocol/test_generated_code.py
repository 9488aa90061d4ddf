"""The committed generated code is exactly what the generator makes from the schemas."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT.parent / "shared" / "kafka-schemas"
PROTOCOL = ROOT / "src" / "odradek" / "protocol"
TOOL = ROOT / "tools" / "generate_messages.py"


@pytest.mark.skipif(not SCHEMAS.is_dir(), reason="Kafka's schemas are not beside the repo")
def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("generate_messages", TOOL)
    assert spec is not None and spec.loader is not None
    generate_messages = importlib.util.module_from_spec(spec)
    # dataclasses looks the module up by name while the tool's classes are created.
    sys.modules["generate_messages"] = generate_messages
    spec.loader.exec_module(generate_messages)
    assert generate_messages.main(["--schemas", str(SCHEMAS), "--out", str(tmp_path)]) == 0
    for package in ("messages", "metadata"):
        fresh = {p.name: p.read_text() for p in (tmp_path / package).glob("*.py")}
        committed = {p.name: p.read_text() for p in (PROTOCOL / package).glob("*.py")}
        assert sorted(fresh) == sorted(committed), f"{package}: files differ; run make generate"
        stale = [name for name in fresh if fresh[name] != committed[name]]
        assert not stale, f"{package}: out of date, run make generate: {stale[:5]}"


def test_generated_code_holds_no_schema_prose() -> None:
    # The schemas' descriptions are Kafka's prose; only names and numbers may be used.
    text = (PROTOCOL / "messages" / "fetch_request.py").read_text()
    assert "The maximum time in milliseconds to wait for the response" not in text
    assert '"about":' not in text and '"fields":' not in text
