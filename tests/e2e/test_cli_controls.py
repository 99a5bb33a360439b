"""Every control command (status, transcript, pause, resume, cancel, steer, steer --model, approve,
reject, raise-limits) on an agent run's id and on an issue's run id, as an operator types them:
the command line against the session's Temporal dev server and a worker, GitHub the simulator.

On an issue's run the commands act on its pipeline and are forwarded to its running agent run (the
fix agent, waiting for an operator on one install after another); where they cannot apply (no
agent running, no call waiting, a run that has ended, an alert's run) they say why in one line
and exit 1. No output ever holds SDK wording ("handler") or a traceback.
"""

from __future__ import annotations

import asyncio
import base64
import uuid

import pytest
from agent_runs import call, write_cassette
from cli_runs import cli_env, invoke_cli, one_line
from factory_runs import POLICY, TRIAGE_TURNS, factory, fix_turns
from simulator_runs import BOT_TOKEN
from temporalio.api.enums.v1 import EventType
from waiting import DEADLINE_S, query_until

from shopfloor.models.agent_run import AgentStatus
from shopfloor.models.call_waits import WAITING_CALLS_QUERY, CallWait
from shopfloor.models.inbox import (
    ALERT_SIGNAL,
    ALERT_WORKFLOW,
    GITHUB_EVENT_SIGNAL,
    ISSUE_WORKFLOW,
    Alert,
    RepoEvent,
    issue_workflow_id,
    pr_workflow_id,
)
from shopfloor.models.inbox_state import IssueInboxInput, IssueOutcome
from shopfloor.models.pipeline_status import PipelineStatus
from shopfloor.settings import Settings

SIGNALED = "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED"  # the start signal (the issue opened), no other
INSTALLS = ["pip install requests", "pip install httpx", "pip install rich"]
NO_AGENT = "no agent is running; `/shopfloor fix <text>` starts a round"


def env_for(settings: Settings) -> dict[str, str]:
    return cli_env(
        SHOPFLOOR_TEMPORAL_ADDRESS=settings.temporal_address,
        SHOPFLOOR_TASK_QUEUE=settings.task_queue,
        SHOPFLOOR_DATA_DIR=str(settings.data_dir),
    )


def clean(result) -> None:
    """No SDK wording and no traceback, whatever the command said."""
    text = f"{result.stdout}\n{result.stderr}"
    assert "handler" not in text.lower() and "Traceback" not in text, str(result)


async def cli(env: dict[str, str], *args: str):
    result = await asyncio.to_thread(invoke_cli, list(args), env)
    clean(result)
    return result


async def ok(env: dict[str, str], *args: str) -> str:
    result = await cli(env, *args)
    assert result.returncode == 0, str(result)
    return result.stdout


async def refused(env: dict[str, str], *args: str) -> str:
    result = await cli(env, *args)
    assert result.returncode == 1, str(result)
    assert result.stdout == "", str(result)
    return one_line(result.stderr)


def installing_turns() -> list[dict]:
    """Read, edit, then three installs, each waiting for an operator; then the tests and submit."""
    read, edit, test, submit = fix_turns()
    installs = [{"tool_calls": [call("run_command", command=c)]} for c in INSTALLS]
    return [read, edit, *installs, test, submit]


async def status_until(client, workflow_id: str, ok_, what: str) -> AgentStatus:
    return await query_until(client.get_workflow_handle(workflow_id), "status", AgentStatus, ok_, what)


async def waiting_at(client, workflow_id: str, step: int) -> AgentStatus:
    return await status_until(
        client, workflow_id, lambda s: [p.step for p in s.pending] == [step], f"a call waiting at step {step}"
    )


# -- on an agent run's id ---------------------------------------------------------------------------


async def test_every_control_on_an_agent_run(settings, running_worker, temporal_client, tmp_path):
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        proc = await asyncio.create_subprocess_exec(
            "git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@x", *args
        )
        assert await proc.wait() == 0
    turns = [{"tool_calls": [call("run_command", command=c)]} for c in INSTALLS] + [{"content": "done"}]
    model = write_cassette(tmp_path / "installs.json", turns)
    other = write_cassette(tmp_path / "other.json", turns)
    env = env_for(settings)
    async with running_worker():
        out = await ok(env, "agent", "code", "--repo", str(repo), "--goal", "install", "--model", model, "--detach")
        wid = out.strip()
        await waiting_at(temporal_client, wid, 1)

        shown = await ok(env, "status", wid)
        assert "state     running" in shown and "cost      $" in shown
        assert f"shopfloor approve {wid} --call" in shown  # the pending call, with the command that answers it

        said = await ok(env, "steer", wid, "also handle negative numbers")
        assert said.strip() == "message queued for the next step"
        await status_until(
            temporal_client,
            wid,
            lambda s: any(e.summary == "operator: also handle negative numbers" for e in s.events),
            "the steer",
        )

        said = await ok(env, "raise-limits", wid, "--steps", "77")
        assert "max_steps=77" in said
        assert (await temporal_client.get_workflow_handle(wid).query("status", result_type=AgentStatus)).max_steps == 77

        assert (await ok(env, "pause", wid)).strip() == "pause requested"
        await status_until(temporal_client, wid, lambda s: s.paused, "the pause")
        assert "paused    yes" in await ok(env, "status", wid)
        assert (await ok(env, "resume", wid)).strip() == "resume requested"
        await status_until(temporal_client, wid, lambda s: not s.paused, "the resume")

        transcript = await ok(env, "transcript", wid)
        assert "install" in transcript and INSTALLS[0] in transcript

        assert (await ok(env, "reject", wid, "--reason", "no new dependencies")).startswith("rejected ")
        await waiting_at(temporal_client, wid, 2)
        assert (await ok(env, "approve", wid)).startswith("approved ")
        await waiting_at(temporal_client, wid, 3)

        said = await ok(env, "steer", wid, "--model", other)
        assert said.strip() == f"model switched to {other} from the next step"
        await status_until(temporal_client, wid, lambda s: s.model == other, "the model switch")

        assert (await ok(env, "cancel", wid, "--reason", "enough")).strip() == "cancel requested"
        result = await asyncio.wait_for(temporal_client.get_workflow_handle(wid).result(), DEADLINE_S)
        assert result["state"] == "cancelled", result

        # The run has ended: every control says so, and status and transcript still answer.
        for args in (
            ["pause"],
            ["resume"],
            ["cancel"],
            ["steer", "hi"],
            ["approve"],
            ["reject"],
            ["raise-limits", "--steps", "9"],
        ):
            line = await refused(env, args[0], wid, *args[1:])
            assert f"does not apply: the agent run {wid} has ended (completed)" in line, line
        assert "state     cancelled" in await ok(env, "status", wid)
        assert INSTALLS[2] in await ok(env, "transcript", wid)


# -- on an issue's run id ---------------------------------------------------------------------------


async def test_every_control_on_an_issue_run_reaches_its_pipeline_and_running_agent(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    other = write_cassette(tmp_path / "fix-other.json", installing_turns())
    models = {"triage": TRIAGE_TURNS, "fix": installing_turns()}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models, POLICY) as f:
        env = env_for(settings)
        number = f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        wid = f.handle.id
        fix_run = f"{wid}/fix-1"
        await waiting_at(temporal_client, fix_run, 3)
        await query_until(
            f.handle, WAITING_CALLS_QUERY, list[CallWait], lambda w: [x.step for x in w] == [3], "the wait shown"
        )

        shown = await ok(env, "status", wid)
        assert f"run       issue #{number} of {f.repo}" in shown
        assert "stage     fix" in shown and "cost      $" in shown
        assert f"agent run {wid}/triage\n" in shown and f"agent run {fix_run} (running)" in shown
        assert "waiting   fix · call " in shown and f"shopfloor approve {fix_run} --call" in shown

        said = await ok(env, "steer", wid, "also handle negative numbers")
        assert said.strip() == f"message queued for the next step (its running agent {fix_run})"
        await status_until(
            temporal_client,
            fix_run,
            lambda s: any(e.summary == "operator: also handle negative numbers" for e in s.events),
            "the steer to reach the fix agent",
        )

        said = await ok(env, "raise-limits", wid, "--steps", "77")
        assert said.strip() == f"limits raised (max_steps=77) on its running agent {fix_run}"
        await status_until(temporal_client, fix_run, lambda s: s.max_steps == 77, "the raise to reach the fix agent")

        assert (await ok(env, "pause", wid)).strip() == "pause requested"
        await status_until(temporal_client, fix_run, lambda s: s.paused, "the fix agent to pause")
        await query_until(f.handle, "status", PipelineStatus, lambda s: s.paused, "the pipeline to pause")
        assert "· paused" in await ok(env, "status", wid)
        assert (await ok(env, "resume", wid)).strip() == "resume requested"
        await status_until(temporal_client, fix_run, lambda s: not s.paused, "the fix agent to resume")
        await query_until(f.handle, "status", PipelineStatus, lambda s: not s.paused, "the pipeline to resume")

        transcript = await cli(env, "transcript", wid)
        assert transcript.returncode == 0, str(transcript)
        assert one_line(transcript.stderr) == f"transcript of {fix_run} (the running agent run of {wid})"
        assert INSTALLS[0] in transcript.stdout

        assert (await ok(env, "reject", wid, "--reason", "no new dependencies")).startswith("rejected ")
        await waiting_at(temporal_client, fix_run, 4)
        await query_until(
            f.handle, WAITING_CALLS_QUERY, list[CallWait], lambda w: [x.step for x in w] == [4], "the second wait"
        )
        assert (await ok(env, "approve", wid)).startswith("approved ")
        await waiting_at(temporal_client, fix_run, 5)

        said = await ok(env, "steer", wid, "--model", other)
        assert said.strip() == f"model switched to {other} from the next step (its running agent {fix_run})"
        await status_until(temporal_client, fix_run, lambda s: s.model == other, "the model switch")

        assert (await ok(env, "cancel", wid, "--reason", "enough")).strip() == "cancel requested"
        outcome = IssueOutcome.model_validate(await asyncio.wait_for(f.handle.result(), DEADLINE_S))
        fix = await temporal_client.get_workflow_handle(fix_run).query("status", result_type=AgentStatus)
        after = await ok(env, "status", wid)
        ended = await refused(env, "pause", wid)

    assert outcome.state == "stopped" and outcome.factory is not None and outcome.factory.result == "cancelled"
    assert fix.state == "cancelled", fix  # it ended at its step boundary, with its checkpoint
    decided = [e.summary.split(":")[0] for e in fix.events if e.summary.startswith(("approved", "rejected"))]
    assert decided == ["rejected", "approved"]  # the third call was still waiting when the run ended
    assert "state     cancelled" in after
    assert ended.startswith(f"shopfloor: pause does not apply: the issue's run {wid} has ended"), ended


async def test_controls_that_cannot_apply_to_an_issue_run_say_why(temporal_client, settings, running_worker, simulator):
    """An issue's run whose pipeline has not started (this deployment runs inboxes only): nothing
    to steer, raise or answer; pause, resume and cancel still act on the run."""
    from pydantic import SecretStr

    gh = settings.model_copy(
        update={"github_api_url": simulator.api_url, "github_token": SecretStr(BOT_TOKEN), "factory_pipeline": False}
    )
    name = f"app-{uuid.uuid4().hex[:8]}"
    repo = f"acme/{name}"
    simulator.create_repo("acme", name)
    with simulator.api("alice") as c:
        number = c.post(f"/repos/{repo}/issues", json={"title": "It breaks", "body": "Steps..."}).json()["number"]
    wid = issue_workflow_id(repo, number)
    env = env_for(gh)
    opened = RepoEvent(
        delivery_id="d-open", repo=repo, number=number, sender="alice", event="issues", action="opened", title="x"
    )
    async with running_worker(gh):
        handle = await temporal_client.start_workflow(
            ISSUE_WORKFLOW,
            IssueInboxInput(repo=repo, number=number),
            id=wid,
            task_queue=gh.task_queue,
            start_signal=GITHUB_EVENT_SIGNAL,
            start_signal_args=[opened],
        )
        assert await refused(env, "steer", wid, "also handle negative numbers") == f"shopfloor: {NO_AGENT}"
        assert await refused(env, "steer", wid, "--model", "scripted:x") == f"shopfloor: {NO_AGENT}"
        line = await refused(env, "raise-limits", wid, "--steps", "9")
        assert line == "shopfloor: raise-limits refused: no agent is running in this run: there are no limits to raise"
        line = await refused(env, "approve", wid)
        assert line == "shopfloor: approve refused: no call is waiting for approval in this run"
        line = await refused(env, "reject", wid, "--call", "call_1")
        assert line == "shopfloor: reject refused: no call 'call_1' is waiting for approval in this run"
        line = await refused(env, "transcript", wid)
        assert line == f"shopfloor: {wid} has started no agent run yet, so there is no transcript"
        # The refused updates and steers left nothing in the run's history.
        kinds = [EventType.Name(e.event_type) async for e in handle.fetch_history_events()]
        assert kinds.count(SIGNALED) == 1 and not [k for k in kinds if "UPDATE" in k], kinds

        assert "state     received (no work started yet)" in await ok(env, "status", wid)
        await ok(env, "pause", wid)
        await query_until(handle, "status", PipelineStatus, lambda s: s.paused, "the pause")
        assert "paused    yes" in await ok(env, "status", wid)
        await ok(env, "resume", wid)
        await query_until(handle, "status", PipelineStatus, lambda s: not s.paused, "the resume")
        await ok(env, "cancel", wid)
        outcome = IssueOutcome.model_validate(await asyncio.wait_for(handle.result(), DEADLINE_S))
    assert outcome.state == "stopped"


CONTROLS = [
    ["pause"],
    ["resume"],
    ["cancel", "--reason", "done"],
    ["steer", "also handle negative numbers"],
    ["approve"],
    ["reject", "--reason", "no"],
    ["raise-limits", "--steps", "5"],
]


@pytest.mark.parametrize("command", CONTROLS, ids=[c[0] for c in CONTROLS])
async def test_a_control_on_an_alert_run_says_it_does_not_apply(temporal_client, settings, command):
    # An alert's run no worker picks up: only its kind matters, and nothing may reach it.
    fingerprint = uuid.uuid4().hex[:8]
    wid = f"alert/generic/{fingerprint}"
    handle = await temporal_client.start_workflow(
        ALERT_WORKFLOW,
        {"source": "generic", "fingerprint": fingerprint},
        id=wid,
        task_queue=f"nobody-{uuid.uuid4().hex}",
        start_signal=ALERT_SIGNAL,
        start_signal_args=[Alert(source="generic", fingerprint=fingerprint, status="firing")],
    )
    try:
        before = len([e async for e in handle.fetch_history_events()])
        line = await refused(env_for(settings), command[0], wid, *command[1:])
        after = len([e async for e in handle.fetch_history_events()])
    finally:
        await handle.terminate("test over")
    assert line.startswith(f"shopfloor: {command[0]} does not apply to an alert run ({wid}): it runs no pipeline"), line
    assert after == before


def open_person_pr(f, author: str, branch: str) -> tuple[int, str]:
    """`author` pushes `branch` with calc/ops.py fixed and opens a pull request; (number, head sha)."""
    gh = f.gh(author)
    main = f.get("/branches/main")["commit"]["sha"]
    assert gh.post(f"/repos/{f.repo}/git/refs", json={"ref": f"refs/heads/{branch}", "sha": main}).status_code == 201
    old = f.get("/contents/calc/ops.py", ref=branch)["sha"]
    content = base64.b64encode(b"def add(a, b):\n    return a + b\n").decode()
    put = {"message": "fix add", "content": content, "sha": old, "branch": branch}
    assert gh.put(f"/repos/{f.repo}/contents/calc/ops.py", json=put).status_code in (200, 201)
    pr = {"title": "Make add() add", "head": branch, "base": "main", "body": "add(2, 3) returned -1."}
    resp = gh.post(f"/repos/{f.repo}/pulls", json=pr)
    assert resp.status_code == 201, resp.text
    return resp.json()["number"], resp.json()["head"]["sha"]


async def test_status_and_cancel_on_a_pull_request_run_reach_its_review_agent(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    review = [{"tool_calls": [call("run_command", command=INSTALLS[0])]}, {"content": "never reached"}]
    policy = POLICY + "pull_requests:\n  review: members\n"
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, {"review": review}, policy) as f:
        env = env_for(settings)
        owner, name = f.repo.split("/")
        simulator.set_permission(owner, name, "carol", "write")
        number, head = open_person_pr(f, "carol", "carol/fix-add")
        wid = pr_workflow_id(f.repo, number)
        review_run = f"{wid}/review-1"
        await waiting_at(temporal_client, review_run, 1)

        shown = await ok(env, "status", wid)
        assert f"run       pull request #{number} of {f.repo}" in shown and "stage     review" in shown
        assert f"agent run {review_run} (running)" in shown and f"pr        #{number} · head {head[:12]}" in shown
        assert (await ok(env, "cancel", wid)).strip() == "cancel requested"
        handle = temporal_client.get_workflow_handle(wid)
        outcome = await asyncio.wait_for(handle.result(), DEADLINE_S)
        review_status = await temporal_client.get_workflow_handle(review_run).query("status", result_type=AgentStatus)

    assert outcome["state"] == "stopped" and outcome["factory"]["result"] == "cancelled", outcome
    assert review_status.state == "cancelled"
