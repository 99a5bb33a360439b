"""The activity catalogue (workflows/activity_catalogue.py) against the worker and the workflows:
every activity the worker registers is catalogued with its real input and output types, every
catalogued one is registered and called from workflow code, every retry is bounded, and workflow
code starts activities only through `call`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.activity import _Definition
from temporalio.client import Client

from shopfloor.activities.github.clients import GitHubClients
from shopfloor.blobs import FileBlobStore
from shopfloor.settings import Settings
from shopfloor.worker import ProviderCache, worker_activities
from shopfloor.workflows import activity_catalogue
from shopfloor.workflows.activity_catalogue import TOOL_ACTIVITIES, ActivityEntry, catalogue

pytestmark = pytest.mark.fast

WORKFLOWS = Path(activity_catalogue.__file__).parent
HELPER = Path(activity_catalogue.__file__).name


def _registered(tmp_path: Path) -> dict[str, _Definition]:
    """What shopfloor/worker.py registers, by activity name."""
    settings = Settings(data_dir=tmp_path / "data")
    blobs = FileBlobStore(tmp_path / "blobs")
    # The client is only kept by the activities that start workflows; none is called here.
    client = cast(Client, object())
    fns = worker_activities(client, settings, blobs, ProviderCache(settings).get, GitHubClients(settings))
    defs = [_Definition.must_from_callable(fn) for fn in fns]
    names = [d.name for d in defs]
    assert len(names) == len(set(names)), "an activity name is registered twice"
    return {cast(str, d.name): d for d in defs}


def _sources() -> dict[str, ast.Module]:
    return {
        p.name: ast.parse(p.read_text(), filename=str(p)) for p in sorted(WORKFLOWS.glob("*.py")) if p.name != HELPER
    }


def _entry_names() -> dict[str, ActivityEntry[Any, Any]]:
    """The catalogue's module-level entries by their Python name."""
    return {k: v for k, v in vars(activity_catalogue).items() if isinstance(v, ActivityEntry)}


def _called_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _called() -> set[str]:
    """Registered names workflow code calls: by the entries (or the tool table) it refers to."""
    entries, called = _entry_names(), set()
    for tree in _sources().values():
        for node in ast.walk(tree):
            ref = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if ref in entries:
                called.add(entries[ref].name)
            if ref in ("TOOL_ACTIVITIES", "tool_activity"):
                called.update(TOOL_ACTIVITIES)
    return called


def test_every_registered_activity_is_catalogued_with_its_types(tmp_path: Path) -> None:
    registered, listed = _registered(tmp_path), catalogue()
    assert sorted(set(registered) - set(listed)) == [], "registered by the worker, missing from the catalogue"
    assert sorted(set(listed) - set(registered)) == [], "catalogued, but the worker does not register it"
    for name, entry in listed.items():
        d = registered[name]
        assert (d.arg_types or [type(None)]) == [entry.input], f"{name}: the entry's input type is not the activity's"
        assert d.ret_type is entry.output, f"{name}: the entry's output type is not the activity's"


def test_every_catalogued_activity_is_called_from_workflow_code() -> None:
    uncalled = sorted(set(catalogue()) - _called())
    assert uncalled == [], f"catalogued but never called from workflows/: {uncalled}"


def test_entries_are_named_after_their_activity_and_their_retries_are_bounded() -> None:
    for attr, entry in _entry_names().items():
        assert attr == entry.name.upper(), f"{attr} holds {entry.name!r}"
    for name, entry in catalogue().items():
        bounded = entry.retry.maximum_attempts > 0 or entry.schedule_to_close is not None
        assert bounded, f"{name} retries without bound"
        assert entry.timeout.total_seconds() > 0


def test_workflow_code_starts_activities_only_through_call() -> None:
    direct = sorted(
        name
        for name, tree in _sources().items()
        if any(isinstance(n, ast.Call) and _called_name(n) == "execute_activity" for n in ast.walk(tree))
    )
    assert direct == [], f"these modules start activities without the catalogue's call(): {direct}"
