"""`shopfloor demo` as a user runs it: a real process that starts its own embedded stack (Temporal
dev server, worker, webhook server, GitHub simulator) on free ports, creates the sample repository,
opens an issue as `alice` and follows the factory to a merged fix with the scripted demo model.

The demo's throw-away data dir is made under TMPDIR, here the test's tmp_path: the Temporal dev
server it starts is found (and, if a test fails, reaped) through that path, and the data dir must
be gone once the demo has stopped.
"""

from __future__ import annotations

import asyncio
import base64
import re
from pathlib import Path

import httpx
from cli_runs import LongRunning, arun_cli, cli_env, kill_pids, pids_with_arg, port_open, wait_until

ISSUE = "issue/demo/pricing/1"
WORKFLOWS = [ISSUE, f"{ISSUE}/triage", f"{ISSUE}/fix-1", f"{ISSUE}/review-1"]
# Per stage: steps, tokens (the demo cassettes' recorded usage), agent run.
TIMELINE = {
    "triage": (2, "5,483", "triage"),
    "policy": (0, "0", "-"),
    "fix": (4, "13,961", "fix-1"),
    "ci": (0, "0", "-"),
    "review": (3, "10,370", "review-1"),
    "merge": (0, "0", "-"),
}


def demo_env(tmp_path: Path) -> dict[str, str]:
    return cli_env(TMPDIR=str(tmp_path), SHOPFLOOR_LOG_JSON="true")


def ports_in(output: str) -> tuple[int, int]:
    """(Temporal UI port, simulator port) from the demo's `ready` lines."""
    ui = re.search(r"Temporal UI  http://localhost:(\d+)", output)
    sim = re.search(r"GitHub       http://127\.0\.0\.1:(\d+) \(the simulator", output)
    assert ui and sim, output
    return int(ui.group(1)), int(sim.group(1))


def assert_merged_run(output: str) -> None:
    ui_port, sim_port = ports_in(output)
    assert "the scripted demo model" in output and "calls no LLM" in output, output
    # Progress as it went, in order.
    expected = [
        "@alice opened issue #1",
        f"the issue run started: {ISSUE}",
        "triage: an agent reads the issue",
        "agent triage on the scripted demo model (triage.json)",
        "triage done (",
        "policy done (",
        "fix: an agent changes the code",
        'step 2: edit_file "if quantity > BULK_MIN_QUANTITY:" -> "if quantity >= BULK_MIN_QUANTITY:"',
        "step 3: run_command python -m unittest -v",
        f"pull request #2 opened from shopfloor/issue-1: http://127.0.0.1:{sim_port}/demo/pricing/pull/2",
        "ci done (",
        "review: an agent reviews",
        "review done (",
        "merge done (",
        f"Timeline of {ISSUE} (scripted model: no real model was called; its tokens are the script's own counts, and cost $0)",
        "Workflows in the Temporal UI",
    ]
    at = 0
    for fragment in expected:
        found = output.find(fragment, at)
        assert found >= 0, f"{fragment!r} missing (or out of order) in:\n{output}"
        at = found
    assert "triage done (" in output and "bug, medium, fixability 0.95" in output, output
    # The timeline: every stage with its duration, steps, tokens and cost.
    for stage, (steps, tokens, child) in TIMELINE.items():
        row = rf"^  {stage:<8} +\d+\.\ds +{steps} +{re.escape(tokens)} +\$0\.00  {re.escape(child)}$"
        assert re.search(row, output, re.MULTILINE), f"no timeline row for {stage} in:\n{output}"
    assert re.search(r"^  total +\d+\.\ds +9 +29,814 +\$0\.00$", output, re.MULTILINE), output
    # The stages and the time between them add up to the total.
    seconds = [float(x) for x in re.findall(r"^  (?:\w+) +(\d+\.\d)s ", output, re.MULTILINE)]
    *parts, total = seconds
    assert re.search(r"^  between +\d+\.\ds +\(between the stages\)$", output, re.MULTILINE), output
    assert abs(sum(parts) - total) <= 0.1 * len(parts), output
    # A Temporal UI link for the issue run and each of its agent runs.
    for workflow_id in WORKFLOWS:
        url = f"http://localhost:{ui_port}/namespaces/default/workflows/{workflow_id.replace('/', '%2F')}"
        assert re.search(rf"^  {re.escape(workflow_id)} +{re.escape(url)}$", output, re.MULTILINE), output
    merged = rf"^merged: pull request #2 http://127\.0\.0\.1:{sim_port}/demo/pricing/pull/2 was squash-merged as [0-9a-f]{{7}}; issue #1 is closed$"
    assert re.search(merged, output, re.MULTILINE), output


def assert_all_gone(tmp_path: Path, output: str) -> None:
    ui_port, sim_port = ports_in(output)
    assert pids_with_arg(str(tmp_path)) == [], "the demo's Temporal dev server outlived it"
    assert not port_open(ui_port) and not port_open(sim_port), "the demo's ports are still open"
    assert list(tmp_path.glob("shopfloor-demo-*")) == [], "the demo's data dir was not deleted"
    assert "Traceback" not in output, output
    assert '"level": "error"' not in output and '"level": "critical"' not in output, output


async def test_demo_takes_the_sample_issue_to_a_merged_fix(tmp_path):
    # Its two-minute goal is a timing goal: measured by the demo's own "finished in" line (the
    # README quotes it), not asserted here.
    try:
        result = await arun_cli(["demo"], demo_env(tmp_path), timeout_s=300)
    finally:
        kill_pids(pids_with_arg(str(tmp_path)))
    assert result.returncode == 0, str(result)
    assert_merged_run(result.stdout)
    assert re.search(
        r"^shopfloor demo finished in \d+\.\d s; everything it started is stopped$", result.stdout, re.MULTILINE
    )
    assert "`shopfloor demo --keep` leaves everything running to open them" in result.stdout
    assert_all_gone(tmp_path, result.stdout + result.stderr)


async def test_demo_keep_leaves_it_running_for_inspection_until_ctrl_c(tmp_path):
    env = demo_env(tmp_path)
    with LongRunning(["demo", "--keep"], env, tmp_path / "demo.log", reap_marker=str(tmp_path)) as demo:

        async def kept() -> bool:
            demo.check_alive()
            return "--keep: everything is still running" in demo.output()

        await wait_until(kept, 300, "the demo to finish and keep running", interval_s=0.5)
        await asyncio.sleep(0.5)  # the hints are printed together; let the last ones land
        output = demo.output()
        assert_merged_run(output)
        ui_port, sim_port = ports_in(output)

        # What it says to open is there: the UI, the simulator's repository and issue, the CLI hints.
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            assert (await http.get(f"http://localhost:{ui_port}/")).status_code == 200
            api = f"http://127.0.0.1:{sim_port}/api/v3/repos/demo/pricing"
            alice = {"Authorization": "token user:alice"}
            issue = (await http.get(f"{api}/issues/1", headers=alice)).json()
            assert issue["state"] == "closed", issue
            cart = (await http.get(f"{api}/contents/pricing/cart.py", headers=alice)).json()
            assert "if quantity >= BULK_MIN_QUANTITY:" in base64.b64decode(cart["content"]).decode()
            pull = (await http.get(f"{api}/pulls/2", headers=alice)).json()
            assert pull["merged"] is True, pull
            # Every link it printed, and every link its progress comment holds, opens.
            comments = (await http.get(f"{api}/issues/1/comments", headers=alice)).json()
            progress = next(c["body"] for c in comments if ":progress -->" in c["body"])
            links = set(re.findall(r"https?://[^\s)`'\"<>\]]+", output + progress))
            assert any("/pull/2" in u for u in links) and any("/tree/shopfloor/issue-1" in u for u in links), links
            for link in sorted(links):  # an API link is printed in a curl line with alice's token
                opened = await http.get(link, follow_redirects=True, headers=alice if "/api/v3/" in link else None)
                assert opened.status_code == 200, f"{link}: {opened.status_code}"
        assert f"Temporal UI   http://localhost:{ui_port}/namespaces/default/workflows" in output
        assert f"git clone http://127.0.0.1:{sim_port}/demo/pricing.git" in output
        hint = re.search(
            r"its status    SHOPFLOOR_TEMPORAL_ADDRESS=(\S+) SHOPFLOOR_TEMPORAL_UI_PORT=(\d+) SHOPFLOOR_DATA_DIR=(\S+) "
            r"shopfloor status (\S+)$",
            output,
            re.MULTILINE,
        )
        assert hint and int(hint.group(2)) == ui_port, output
        status = await arun_cli(
            ["status", hint.group(4)],
            cli_env(
                SHOPFLOOR_TEMPORAL_ADDRESS=hint.group(1),
                SHOPFLOOR_TEMPORAL_UI_PORT=hint.group(2),
                SHOPFLOOR_DATA_DIR=hint.group(3),
            ),
        )
        assert status.returncode == 0 and "state     completed" in status.stdout, str(status)
        # Its links are this demo's UI, not the default port's.
        assert f"http://localhost:{ui_port}/" in status.stdout and ":8233/" not in status.stdout, status.stdout

        demo.check_alive()  # still running after all that
        code, _ = demo.interrupt(timeout_s=30)
        output = demo.output()
        assert code == 0, f"exit status {code}:\n{output}"
        assert "shopfloor demo finished in" in output and "everything it started is stopped" in output, output
    assert_all_gone(tmp_path, output)


async def test_ctrl_c_in_the_middle_of_the_demo_stops_everything(tmp_path):
    with LongRunning(["demo"], demo_env(tmp_path), tmp_path / "demo.log", reap_marker=str(tmp_path)) as demo:

        async def fixing() -> bool:
            demo.check_alive()
            return "fix: an agent changes the code" in demo.output()

        await wait_until(fixing, 300, "the demo to reach the fix stage", interval_s=0.2)
        code, _ = demo.interrupt(timeout_s=30)
        output = demo.output()
    assert code == 130, f"exit status {code}:\n{output}"
    assert "shopfloor demo interrupted: everything is stopped" in output, output
    assert_all_gone(tmp_path, output)


async def test_a_real_model_without_its_key_is_refused_before_anything_starts(tmp_path):
    by_flag = await arun_cli(["demo", "--model", "openai:gpt-4o-mini"], demo_env(tmp_path))
    by_env = await arun_cli(["demo"], demo_env(tmp_path) | {"SHOPFLOOR_MODEL": "anthropic:claude-sonnet-4-5"})
    for result, key in ((by_flag, "OPENAI_API_KEY"), (by_env, "ANTHROPIC_API_KEY")):
        assert result.returncode == 2, str(result)
        said = " ".join(result.stderr.split())
        assert key in said and "not set in this terminal" in said and "Traceback" not in said, str(result)
        assert "starting the embedded stack" not in result.stdout, str(result)
    assert list(tmp_path.glob("shopfloor-demo-*")) == [] and pids_with_arg(str(tmp_path)) == []
