"""`shopfloor bench` runs each benchmark beside its reference and reports both (figures are for
reading, not asserting).

One run of the whole quick suite: it runs the loop benchmark (3 steps at 0 and 500 ms model
latency) and the webhook benchmark (30 requests at concurrency 4) and carries each one's own
report, so their rows are checked here rather than in runs of `bench loop` and `bench webhooks`
of their own. The subcommands' argument handling is tested
in-process (tests/unit/test_cli_arguments.py)."""

from __future__ import annotations

import json
import pstats

from cli_runs import run_cli
from worker_process import worker_env

from shopfloor.bench.suite import SuiteReport


def assert_breakdown(breakdown: dict, *, steps: int) -> None:
    """An in-memory step's split: its parts add up to the step, and each step wrote blobs (a cache
    may spare the reads)."""
    assert breakdown["steps"] == steps
    parts = ("model_call_ms", "model_step_rest_ms", "tool_ms", "blob_io_ms", "loop_ms")
    assert abs(sum(breakdown[p] for p in parts) - breakdown["total_ms"]) < 1e-6 * max(1.0, breakdown["total_ms"])
    assert all(breakdown[p] >= 0 for p in parts), breakdown  # no instant counted twice
    assert breakdown["model_call_ms"] > 0 and breakdown["tool_ms"] > 0 and breakdown["blob_io_ms"] > 0, breakdown
    assert breakdown["blob_writes"] > 0 and breakdown["blob_reads"] >= 0 and breakdown["blob_read_bytes"] >= 0


def test_bench_runs_every_row_beside_its_reference_in_one_table(tmp_path):
    # run_cli: on a timeout the bench's process group gets SIGINT first, so it stops the Temporal
    # dev servers and workers it started instead of leaving them to load the machine.
    profile = tmp_path / "worker.prof"
    run = run_cli(
        ["bench", "--quick", "--json", "--profile-worker", str(profile)],
        worker_env(SHOPFLOOR_DATA_DIR=str(tmp_path), SHOPFLOOR_LOG_LEVEL="WARNING"),
        timeout_s=600,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["quick"] is True and report["errors"] == {}, report["errors"]
    assert report["machine"] and report["notes"]
    # How fast the machine was, to compare runs by: the yardstick at both ends, and the CPU steal.
    speed = report["speed"]
    assert speed["yardstick_ms_start"] > 0 and speed["yardstick_ms_end"] > 0
    assert speed["cpu_steal_percent"] is None or 0 <= speed["cpu_steal_percent"] <= 100
    assert set(report["seconds"]) == {"loop", "history", "concurrency", "webhooks", "resume"}
    params = report["params"]
    rows = {row["key"]: row for row in report["rows"]}
    assert list(rows) == [
        *(f"loop_{ms}ms" for ms in params["loop_latencies_ms"]),
        "loop_temporal_share_0ms",
        f"loop_memory_{params['loop_long_steps']}_steps",
        *(f"history_{n}_steps" for n in params["history_steps"]),
        "concurrent_runs",
        "webhooks",
        "resume_after_kill",
    ]
    for key, row in rows.items():
        for field in ("measured", "reference", "difference", "ratio"):
            assert isinstance(row[field], (int, float)), (key, field, row)
        assert row["measured"] > 0 and row["reference"] > 0, row
        assert row["what"] and row["unit"] and row["measured_label"] and row["reference_label"], row
        assert abs(row["difference"] - (row["measured"] - row["reference"])) < 1e-6 * max(1.0, abs(row["measured"]))
        assert abs(row["ratio"] - row["measured"] / row["reference"]) < 1e-9 * max(1.0, row["ratio"])
    # The shortest history run is every history row's reference.
    first = rows[f"history_{params['history_steps'][0]}_steps"]
    assert first["ratio"] == 1.0
    assert {rows[f"history_{n}_steps"]["reference"] for n in params["history_steps"]} == {first["measured"]}
    # The resume row's reference is the heartbeat timeout the bench set; the run was killed in the
    # middle of a model call, that call was made again, and the run finished.
    assert rows["resume_after_kill"]["reference"] == params["resume_heartbeat_s"]
    resume = report["reports"]["resume"]
    assert resume["state"] == "completed" and resume["model_calls_repeated"] >= 1, resume
    assert resume["killed_after_s"] > 0, resume
    assert resume["call_completed_s"] <= resume["resume_s"], resume
    # The retried call's result was not offered to the dead worker's sticky queue first.
    assert resume["result_task_queue"] == "normal" and resume["sticky_timeouts"] == 0, resume
    # Every benchmark's own report travels along in the JSON.
    assert set(report["reports"]) == set(report["seconds"])
    assert report["reports"]["history"]["rows"][0]["runs"] >= 1

    # The loop benchmark: durable and in-memory side by side at each model latency.
    loop_rows = report["reports"]["loop"]["rows"]
    assert [r["model_latency_ms"] for r in loop_rows] == params["loop_latencies_ms"] == [0, 500]
    for row in loop_rows:
        assert row["steps"] == params["loop_steps"] == 3
        assert row["durable_ms_per_step"] > 0 and row["memory_ms_per_step"] > 0
        assert row["history_bytes_per_step"] > 0
    # With 500 ms of model latency both sides wait at least that long per model call.
    slow = loop_rows[1]
    assert slow["memory_ms_per_step"] >= 500 and slow["durable_ms_per_step"] >= 500
    # Each in-memory step is split into its parts, which add up to it; Temporal's share is the
    # durable step minus it. The split is in the table's detail too.
    for row in loop_rows:
        assert_breakdown(row["breakdown"], steps=row["steps"])
        assert row["breakdown"]["temporal_ms"] == row["overhead_ms_per_step"]
        assert "model call" in rows[f"loop_{row['model_latency_ms']}ms"]["detail"]
        assert "Temporal" in rows[f"loop_{row['model_latency_ms']}ms"]["detail"]
    assert slow["breakdown"]["model_call_ms"] >= 500  # the fake model's latency is inside the provider call
    # Temporal's share at 0 ms beside Temporal's floor for a step's shape, run on the same server.
    floor = report["reports"]["loop"]["floor"]
    assert floor["steps"] == params["loop_steps"]
    assert floor["ms_per_step"] > 0 and floor["activity_only_ms_per_step"] > 0
    assert str(round(floor["activity_only_ms_per_step"], 1)) in rows["loop_temporal_share_0ms"]["detail"]
    share = rows["loop_temporal_share_0ms"]
    assert share["measured"] == loop_rows[0]["overhead_ms_per_step"] and share["reference"] == floor["ms_per_step"]
    # The long in-memory run, per step, beside the loop's own in-memory figure at 0 ms.
    long_run = report["reports"]["loop"]["long_run"]
    assert long_run["steps"] == params["loop_long_steps"] and long_run["reference_steps"] == params["loop_steps"]
    long_row = rows[f"loop_memory_{params['loop_long_steps']}_steps"]
    assert long_row["reference"] == loop_rows[0]["memory_ms_per_step"] == long_run["reference_ms_per_step"]
    assert long_row["measured"] == long_run["memory_ms_per_step"]
    assert_breakdown(long_run["breakdown"], steps=params["loop_long_steps"])

    # Concurrent runs ran on a worker process of their own: its CPU time and peak memory are reported.
    concurrency = report["reports"]["concurrency"]
    assert concurrency["runs"] == params["concurrent_runs"]
    assert concurrency["worker_cpu_s"] > 0 and concurrency["worker_cpu_ms_per_step"] > 0
    assert concurrency["worker_peak_rss_mb"] >= concurrency["worker_rss_before_mb"] > 0
    assert concurrency["bench_cpu_s"] > 0 and concurrency["server_cpu_s"] > 0
    # --profile-worker: that worker ran under cProfile, which saw its model calls.
    stats = pstats.Stats(str(profile))
    assert any(name == "model_step" for _, _, name in stats.stats), "model_step is not in the worker's profile"
    assert_breakdown(concurrency["memory_breakdown"], steps=params["concurrent_steps"])
    assert "peaked at" in rows["concurrent_runs"]["detail"] and "CPU s" in rows["concurrent_runs"]["detail"]

    # The webhook benchmark: the edge beside its ceiling (a bare start_workflow loop) and the
    # deliveries it rejects.
    webhooks = report["reports"]["webhooks"]
    assert webhooks["machine"] and webhooks["notes"]
    assert len(webhooks["rows"]) == 3
    edge, ceiling, rejected = webhooks["rows"]
    assert "start workflows" in edge["name"] and edge["expected_status"] == 202
    assert "start_workflow" in ceiling["name"] and ceiling["expected_status"] is None
    assert "rejected" in rejected["name"] and rejected["expected_status"] == 401
    for row in webhooks["rows"]:
        assert row["requests"] == params["webhook_requests"] == 30
        assert row["concurrency"] == params["webhook_concurrency"] == 4
        assert row["ok"] == row["requests"] and row["errors"] == {}, row
        assert row["rps"] > 0
        assert row["p99_ms"] >= row["p50_ms"] > 0

    # The markdown form of the same report: a header naming the machine, then one line per row.
    lines = SuiteReport.model_validate(report).markdown().splitlines()
    assert lines[0].startswith(f"shopfloor bench on {report['machine']}; CI-sized parameters (--quick)")
    assert lines[2] == "| benchmark | measured | reference | measured − reference | measured / reference |"
    assert [line.split(" | ")[0] for line in lines[4 : 4 + len(rows)]] == [f"| {r['what']}" for r in rows.values()]
