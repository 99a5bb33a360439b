"""The spend ledger end to end: issues opened on the simulator reach the real edge and the real
IssueWorkflow, whose pipeline asks LedgerWorkflow to start. A daily run limit holds the third
issue (its comment and `shopfloor status` say why) until `shopfloor budget set` raises it; a
concurrency of one runs two issues one after the other, the second saying it is queued.
"""

from __future__ import annotations

import asyncio
import base64

from agent_runs import call, record_history
from cli_runs import cli_env, invoke_cli
from factory_runs import APPROVE, POLICY, TEST_CMD, TRIAGE_TURNS, Factory, factory, fix_turns
from waiting import DEADLINE_S, query_until

from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import issue_workflow_id, pr_workflow_id
from shopfloor.models.ledger import LEDGER_QUERY, LedgerView, ledger_id

# Triage runs, then the gate parks the run for a maintainer's `/shopfloor fix`: every run ends its
# work quickly and holds no agent, so the ledger's decisions are what the test sees.
LABEL_POLICY = f"auto_fix: label\nrequire_human_approval: true\ntest_command: {TEST_CMD}\n"
MODELS = {"triage": TRIAGE_TURNS}


def env(settings, **more: str) -> dict[str, str]:
    return cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=settings.temporal_address,
        SHOPFLOOR_TASK_QUEUE=settings.task_queue,
        SHOPFLOOR_DATA_DIR=str(settings.data_dir),
        **more,
    )


async def state_of(f: Factory, number: int, ok, what: str) -> FactoryState:
    handle = f.client.get_workflow_handle(issue_workflow_id(f.repo, number))
    return await query_until(handle, "factory", FactoryState, ok, what, DEADLINE_S)


async def test_a_daily_limit_holds_the_third_issue_until_an_operator_raises_it(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    async with factory(
        simulator, settings, running_worker, temporal_client, tmp_path, MODELS, LABEL_POLICY, repo_runs_per_day=2
    ) as f:
        first, second = f.open_issue("one", "add() subtracts"), f.open_issue("two", "mul() is slow")
        for n in (first, second):
            await state_of(f, n, lambda s: s.result == "parked", f"#{n} to triage and park at the gate")
        third = f.open_issue("three", "div() by zero")
        waiting = await state_of(f, third, lambda s: s.waiting_for == "budget", "#3 to wait for the budget")
        assert waiting.children == [] and waiting.steps == 0  # no agent ran for it
        assert f"{f.repo}'s daily limit of 2 run(s) is reached (2 today, UTC)" in waiting.reason
        body = await f.progress_when(third, "daily limit of 2 run(s) is reached")
        assert "**Waiting** for the spend ledger to allow another run" in body
        status = await asyncio.to_thread(invoke_cli, ["status", issue_workflow_id(f.repo, third)], env(settings))
        assert status.returncode == 0 and "daily limit of 2 run(s) is reached" in status.stdout, status
        shown = await asyncio.to_thread(invoke_cli, ["budget", "show", f.repo], env(settings))
        assert shown.returncode == 0, shown
        assert "today (UTC): 2 run(s)" in shown.stdout and "limits: 2 run(s)" in shown.stdout, shown.stdout
        assert f"{issue_workflow_id(f.repo, third)}: {f.repo}'s daily limit" in shown.stdout

        raised = await asyncio.to_thread(invoke_cli, ["budget", "set", f.repo, "--runs-per-day", "3"], env(settings))
        assert raised.returncode == 0, raised
        done = await state_of(f, third, lambda s: s.result == "parked", "#3 to start once the limit is raised")
        assert done.children == [f"{issue_workflow_id(f.repo, third)}/triage"]
        body = await f.progress_when(third, "the spend ledger let it start")
        handle = temporal_client.get_workflow_handle(ledger_id(settings.task_queue))
        # Each parked run steps aside (a run waiting for a person holds no slot): all three, soon.
        ledger = await query_until(
            handle,
            LEDGER_QUERY,
            LedgerView,
            lambda v: v.total.running == 0,
            "the parked runs to step aside",
            DEADLINE_S,
        )
        await record_history(handle, "ledger-daily-limit-raised")
    (repo,) = [r for r in ledger.repos if r.repo == f.repo]
    assert (repo.today.runs, repo.month.runs, repo.queued, repo.limits.runs_per_day) == (3, 3, [], 3)
    assert ledger.total.today.runs == 3  # stepping aside counts no run again
    refused = await asyncio.to_thread(invoke_cli, ["budget", "set", f.repo], env(settings))
    assert refused.returncode == 2 and "nothing to set" in refused.stderr and "Traceback" not in refused.stderr


async def test_with_one_run_at_a_time_the_second_issue_queues_until_the_first_ends(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    models = {"triage": TRIAGE_TURNS, "fix": fix_turns(), "review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(
        simulator, settings, running_worker, temporal_client, tmp_path, models, POLICY, repo_max_running=1
    ) as f:
        first = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        # #1 works its way to the merge, where it waits for a maintainer's approval: still running.
        await state_of(f, first, lambda s: s.waiting_for == "approval", "#1 to wait for its approval")
        second = f.open_issue("two", "mul() is slow")
        queued = await state_of(f, second, lambda s: s.waiting_for == "queue", "#2 to queue")
        assert f"{f.repo} runs at most 1 at once (1 running)" in queued.reason and queued.children == []
        body = await f.progress_when(second, "runs at most 1 at once")
        assert "**Waiting** for a free slot" in body
        # #1 ends (approved and merged): #2 starts and works its way to its own approval.
        f.comment(first, "/shopfloor approve", "maria")
        started = await state_of(f, second, lambda s: s.waiting_for == "approval", "#2 to start once #1 ended")
        assert started.children[0] == f"{issue_workflow_id(f.repo, second)}/triage"
        merged = await state_of(f, first, lambda s: s.result == "merged", "#1 merged")
        ledger = await temporal_client.get_workflow_handle(ledger_id(settings.task_queue)).query(
            LEDGER_QUERY, result_type=LedgerView
        )
    assert merged.merged_sha
    (repo,) = [r for r in ledger.repos if r.repo == f.repo]
    assert (repo.today.runs, repo.running, repo.queued) == (2, 1, [])


async def test_a_pull_requests_review_waits_for_the_ledger_like_an_issues_run(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    policy = LABEL_POLICY + "pull_requests:\n  review: members\n"
    review = {"review": [{"tool_calls": [call("submit", **APPROVE)]}]}
    async with factory(
        simulator, settings, running_worker, temporal_client, tmp_path, review, policy, repo_runs_per_day=0
    ) as f:
        gh = f.gh("maria")
        main = f.get("/branches/main")["commit"]["sha"]
        assert gh.post(f"/repos/{f.repo}/git/refs", json={"ref": "refs/heads/fix", "sha": main}).status_code == 201
        old = f.get("/contents/calc/ops.py", ref="fix")["sha"]
        ops = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
        put = {"message": "fix add", "content": base64.b64encode(ops.encode()).decode(), "sha": old, "branch": "fix"}
        assert gh.put(f"/repos/{f.repo}/contents/calc/ops.py", json=put).status_code in (200, 201)
        resp = gh.post(f"/repos/{f.repo}/pulls", json={"title": "Make add() add", "head": "fix", "base": "main"})
        assert resp.status_code == 201, resp.text
        handle = temporal_client.get_workflow_handle(pr_workflow_id(f.repo, resp.json()["number"]))
        waiting = await query_until(
            handle, "factory", FactoryState, lambda s: s.waiting_for == "budget", "the review to wait", DEADLINE_S
        )
        assert f"{f.repo}'s daily limit of 0 run(s) is reached" in waiting.reason and waiting.children == []
        raised = await asyncio.to_thread(invoke_cli, ["budget", "set", f.repo, "--runs-per-day", "1"], env(settings))
        assert raised.returncode == 0, raised
        reviewed = await query_until(
            handle, "factory", FactoryState, lambda s: s.verdict == "approve", "the review to run", DEADLINE_S
        )
        ledger = await query_until(
            temporal_client.get_workflow_handle(ledger_id(settings.task_queue)),
            LEDGER_QUERY,
            LedgerView,
            lambda v: v.total.running == 0,
            "the review to end in the ledger",
            DEADLINE_S,
        )
    assert reviewed.children == [f"{handle.id}/review-1"]
    (repo,) = [r for r in ledger.repos if r.repo == f.repo]
    assert (repo.today.runs, repo.running, repo.queued) == (1, 0, [])
