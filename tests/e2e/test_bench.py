"""`shopfloor bench loop` runs both sides and reports them (figures are for reading, not asserting)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from worker_process import worker_env

SHOPFLOOR = str(Path(sys.executable).parent / "shopfloor")


def test_bench_loop_reports_durable_and_in_memory_side_by_side(tmp_path):
    run = subprocess.run(
        [SHOPFLOOR, "bench", "loop", "--steps", "3", "--concurrent", "4", "--json"],
        env=worker_env(SHOPFLOOR_DATA_DIR=str(tmp_path), SHOPFLOOR_LOG_LEVEL="WARNING"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    rows = report["rows"]
    together = report["concurrency"]
    assert together["runs"] == 4 and together["steps"] == 3
    assert together["durable_steps_per_s"] > 0 and together["memory_steps_per_s"] > 0
    assert [r["model_latency_ms"] for r in rows] == [0, 500]
    for row in rows:
        assert row["steps"] == 3
        assert row["durable_ms_per_step"] > 0 and row["memory_ms_per_step"] > 0
        assert row["history_bytes_per_step"] > 0
    # With 500 ms of model latency both sides wait at least that long per model call.
    slow = rows[1]
    assert slow["memory_ms_per_step"] >= 500 and slow["durable_ms_per_step"] >= 500


def test_bench_webhooks_reports_edge_and_ceiling_side_by_side(tmp_path):
    run = subprocess.run(
        [SHOPFLOOR, "bench", "webhooks", "--requests", "30", "--concurrency", "4", "--json"],
        env=worker_env(SHOPFLOOR_DATA_DIR=str(tmp_path), SHOPFLOOR_LOG_LEVEL="WARNING"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    rows = report["rows"]
    assert len(rows) == 3
    edge, ceiling, rejected = rows
    assert "start workflows" in edge["name"] and edge["expected_status"] == 202
    assert "start_workflow" in ceiling["name"] and ceiling["expected_status"] is None
    assert "rejected" in rejected["name"] and rejected["expected_status"] == 401
    for row in rows:
        assert row["requests"] == 30 and row["concurrency"] == 4
        assert row["ok"] == row["requests"] and row["errors"] == {}, row
        assert row["rps"] > 0
        assert row["p99_ms"] >= row["p50_ms"] > 0
    assert report["machine"] and report["notes"]
