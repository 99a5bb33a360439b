"""The Grafana dashboard (deploy/grafana/shopfloor-dashboard.json) asks only for series a worker
exports, and shows every metric a worker exports: the names come from the worker's registry
(activities/metrics.py, shopfloor/worker_metrics.py), not from a list copied here."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shopfloor.activities.metrics import REGISTRY
from shopfloor.worker_metrics import exported_names

pytestmark = pytest.mark.fast

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "shopfloor-dashboard.json"
METRIC = re.compile(r"\bshopfloor_[a-z0-9_]+")


def _expressions(node: Any) -> Iterator[str]:
    """Every PromQL expression in the dashboard: panel targets' `expr` and variables' queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, str) and "(" in value:
                yield value
            else:
                yield from _expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _expressions(item)


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def test_every_metric_the_dashboard_queries_is_exported_by_the_worker() -> None:
    exported = exported_names()
    expressions = list(_expressions(_dashboard()))
    assert len(expressions) >= 15, expressions  # the scan itself finds the panels' queries
    unknown = {name for expr in expressions for name in METRIC.findall(expr)} - exported
    assert not unknown, f"the dashboard queries series no worker exports: {sorted(unknown)}"
    # Each panel query reads at least one of ours (none reads only some other exporter's).
    assert all(METRIC.search(expr) for expr in expressions), [e for e in expressions if not METRIC.search(e)]


def test_every_metric_the_worker_exports_is_on_the_dashboard() -> None:
    queried = " ".join(_expressions(_dashboard()))
    families = {family.name for family in REGISTRY.collect()}
    assert families >= {"shopfloor_agent_steps", "shopfloor_model_cost_usd", "shopfloor_task_queue_backlog"}
    missing = sorted(f for f in families if not re.search(rf"\b{f}(_total|_bucket|_sum|_count)?\b", queried))
    assert not missing, f"exported but on no panel of {DASHBOARD.name}: {missing}"


def test_the_dashboard_has_a_panel_for_each_subject() -> None:
    titles = " | ".join(p["title"].lower() for p in _dashboard()["panels"] if p["type"] != "row")
    for subject in ("steps", "model calls", "latency", "tokens", "cost", "tool calls", "sandbox kills", "backlog"):
        assert subject in titles, f"no panel about {subject}: {titles}"


def test_exported_names_follow_prometheus_suffixes() -> None:
    names = exported_names()
    assert {
        "shopfloor_agent_steps_total",
        "shopfloor_model_call_seconds_bucket",
        "shopfloor_task_queue_backlog",
    } <= names
    assert "shopfloor_agent_steps" not in names  # a counter is scraped as _total only
