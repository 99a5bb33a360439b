"""A Lean model (shopfloor/models/agent_run.py) leaves fields at their default out of the JSON that
goes into workflow history, so a recorded history reads a left-out field as whatever its default
is when it replays. These defaults are therefore frozen: this test compares them with the ones
recorded in lean_defaults.json, and a changed default fails here rather than in a replay of a
real run. A new field is fine (add it to the file); a different default must be a new field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from shopfloor.models import agent_run
from shopfloor.models.agent_run import Lean

RECORDED = Path(__file__).with_name("lean_defaults.json")


def _lean_models() -> dict[str, type[BaseModel]]:
    return {
        name: cls
        for name, cls in vars(agent_run).items()
        if isinstance(cls, type) and issubclass(cls, Lean) and cls is not Lean
    }


def _defaults(cls: type[BaseModel]) -> dict[str, object]:
    found: dict[str, object] = {}
    for name, field in cls.model_fields.items():
        if field.is_required():
            continue
        value = field.get_default(call_default_factory=True)
        found[name] = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return found


def current() -> dict[str, dict[str, object]]:
    return {name: _defaults(cls) for name, cls in sorted(_lean_models().items())}


@pytest.mark.fast
def test_no_lean_models_default_has_changed():
    recorded = json.loads(RECORDED.read_text())
    now = json.loads(json.dumps(current(), default=str))
    assert set(recorded) <= set(now), f"Lean models gone: {sorted(set(recorded) - set(now))}"
    for model, defaults in recorded.items():
        for field, value in defaults.items():
            assert field in now[model], f"{model}.{field} is gone: recorded histories may still leave it out"
            assert now[model][field] == value, (
                f"{model}.{field}'s default changed from {value!r} to {now[model][field]!r}: "
                "a recorded history that left it out would replay differently; make a new field instead"
            )
    new = {f"{m}.{f}" for m, d in now.items() for f in d if f not in recorded.get(m, {})}
    assert not new, f"record the new fields' defaults in {RECORDED.name}: {sorted(new)}"


if __name__ == "__main__":  # regenerate after adding a field: python tests/unit/test_lean_defaults.py
    RECORDED.write_text(json.dumps(current(), default=str, indent=2, sort_keys=True) + "\n")
