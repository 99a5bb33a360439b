"""The reconciler, on a real Temporal dev server, against the GitHub simulator.

- A delivery the webhook target answered 503 is redelivered (same guid); once one attempt has
  succeeded, the next run redelivers nothing.
- A labelled open issue without a workflow gets `issue/<repo>/<n>` started; the next run starts
  nothing (the same run keeps running).
- The scenario the reconciler exists for: Temporal is down when GitHub delivers an issue, the
  real webhook app answers 503; Temporal comes back, the reconciler redelivers, the app answers
  202 and the issue's workflow exists.
- The schedule: `ensure_reconcile_schedule` twice leaves one schedule with the configured interval
  and SKIP overlap; with no repositories there is none.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from agent_runs import record_history
from github import Auth
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN, SimulatorHandle, app_keys, running_simulator
from temporalio.client import Client, ScheduleIntervalSpec, ScheduleOverlapPolicy, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from threaded_server import serving
from webhook_receiver import receiving

from shopfloor.activities.github.clients import GitHubClients
from shopfloor.blobs import FileBlobStore, get_json
from shopfloor.devserver import DevServer, free_port
from shopfloor.models.inbox import RepoEvent
from shopfloor.models.reconcile import APP_HOOK, ReconcileInput, ReconcileReport
from shopfloor.reconcile_schedule import SCHEDULE_ID, ensure_reconcile_schedule
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.webhooks.app import create_app
from shopfloor.worker import SANDBOX, reconciler_activities
from shopfloor.workflows.reconcile import ReconcileWorkflow

REPO = "acme/app"


def github_settings(settings: Settings, sim: SimulatorHandle) -> Settings:
    return settings.model_copy(update={"github_api_url": sim.api_url, "github_token": SecretStr(BOT_TOKEN)})


def make_repo(sim: SimulatorHandle, tmp_path: Path) -> str:
    """A repository with a name of its own: the Temporal server (and its workflow ids) is shared."""
    src = tmp_path / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "README.md").write_text("# app\n")
    name = f"app-{uuid.uuid4().hex[:8]}"
    sim.create_repo("acme", name, source_dir=src)
    return f"acme/{name}"


def add_hook(sim: SimulatorHandle, repo: str, url: str, secret: str | None = None) -> int:
    config = {"url": url, "content_type": "json", **({"secret": secret} if secret else {})}
    with sim.api() as c:
        resp = c.post(f"/repos/{repo}/hooks", json={"config": config, "events": ["*"]})
        resp.raise_for_status()
        return int(resp.json()["id"])


async def reconcile(client: Client, task_queue: str, inp: ReconcileInput, record: str = "") -> ReconcileReport:
    """One reconciler run; `record` names its history in tests/histories (SHOPFLOOR_RECORD_HISTORIES=1)."""
    handle = await client.start_workflow(
        ReconcileWorkflow.run,
        inp,
        id=f"reconcile-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=ReconcileReport,
        execution_timeout=timedelta(minutes=2),
    )
    report = await handle.result()
    if record:
        await record_history(handle, record)
    return report


@asynccontextmanager
async def reconcile_worker(client: Client, s: Settings, issue_queue: str) -> AsyncIterator[Worker]:
    """Only the reconciler, on `s.task_queue`; the issue workflows it starts go to `issue_queue`,
    which nobody polls, so they stay running exactly as started."""
    blobs = FileBlobStore(s.data_dir / "blobs")
    issue_settings = s.model_copy(update={"task_queue": issue_queue})
    acts = reconciler_activities(client, issue_settings, blobs, GitHubClients(issue_settings))
    worker = Worker(
        client,
        task_queue=s.task_queue,
        workflows=[ReconcileWorkflow],
        activities=acts,
        workflow_runner=SANDBOX,
        max_cached_workflows=0,
    )
    async with worker:
        yield worker


async def test_failed_delivery_is_redelivered_once_then_left_alone(
    simulator: SimulatorHandle, settings: Settings, running_worker, temporal_client: Client, tmp_path: Path
):
    repo = make_repo(simulator, tmp_path)
    with receiving() as receiver:
        receiver.status = 503  # the edge could not hand the event to Temporal
        # Another service's hook on the same repository: its failures are not ours to redeliver.
        add_hook(simulator, repo, receiver.url.replace("/hook", "/other-service"))
        hook_id = add_hook(simulator, repo, receiver.url.replace("/hook", "/webhooks/github"))
        with simulator.api("alice") as c:
            c.post(f"/repos/{repo}/issues", json={"title": "It breaks", "body": "..."}).raise_for_status()
        simulator.wait_idle()
        (guid,) = [
            r.headers["x-github-delivery"]
            for r in receiver.received
            if r.event == "issues" and r.headers.get("x-github-hook-id") == str(hook_id)
        ]
        assert any(d.get("status_code") == 503 for d in simulator.deliveries()), simulator.deliveries()

        receiver.status = 202
        s = github_settings(settings, simulator)
        inp = ReconcileInput(repos=[repo])
        async with running_worker(s):
            first = await reconcile(temporal_client, s.task_queue, inp, record="reconcile-redelivered")
            assert [(d.hook_id, d.guid) for d in first.redelivered] == [(hook_id, guid)], first
            assert first.errors == []
            assert any(x.what.startswith("hook") and x.reason == "not a shopfloor hook" for x in first.skipped)
            simulator.wait_idle()
            # The original and the redelivery carry the same guid (the edge de-duplicates by it).
            to_us = [r for r in receiver.received if r.headers.get("x-github-hook-id") == str(hook_id)]
            assert sum(r.headers.get("x-github-delivery") == guid for r in to_us) == 2
            latest = [d for d in simulator.deliveries() if d.get("guid") == guid and d["hook_id"] == hook_id]
            assert any(d.get("status_code") == 202 for d in latest), latest

            second = await reconcile(temporal_client, s.task_queue, inp)
            assert second.redelivered == [] and second.errors == [], second


async def test_labelled_issue_without_workflow_is_started_once(
    simulator: SimulatorHandle, settings: Settings, temporal_client: Client, tmp_path: Path
):
    repo = make_repo(simulator, tmp_path)
    with simulator.api("acme") as c:  # the owner may label; no hook, so no webhook ever arrived
        issue = c.post(
            f"/repos/{repo}/issues",
            json={"title": "Fix me", "body": "Steps\u200b to <!-- hidden -->reproduce", "labels": ["shopfloor"]},
        ).json()
        c.post(f"/repos/{repo}/issues", json={"title": "Not for us", "labels": ["question"]}).raise_for_status()
    s = github_settings(settings, simulator)
    inp = ReconcileInput(repos=[repo], trigger_label="shopfloor")
    issue_queue = f"issues-{uuid.uuid4().hex[:8]}"
    workflow_id = f"issue/{repo}/{issue['number']}"
    async with reconcile_worker(temporal_client, s, issue_queue):
        first = await reconcile(temporal_client, s.task_queue, inp)
        assert first.issues_started == [workflow_id], first
        desc = await temporal_client.get_workflow_handle(workflow_id).describe()
        assert desc.status == WorkflowExecutionStatus.RUNNING and desc.workflow_type == "IssueWorkflow"
        assert (await desc.static_summary() or "").endswith(
            "started by the reconciler (`shopfloor` label, no workflow)"
        )
        event = await start_signal(temporal_client, workflow_id)
        # What the edge would have sent: a stable delivery id, a person as sender, the text snapshotted.
        assert event.delivery_id == f"reconcile:{repo}#{issue['number']}:shopfloor"
        assert (event.event, event.action, event.label, event.sender) == ("issues", "labeled", "shopfloor", "acme")
        assert event.text is not None and event.text.preview == "Steps to reproduce"
        stored = await get_json(FileBlobStore(s.data_dir / "blobs"), event.text.digest)
        assert stored == {
            "title": "Fix me",
            "body": "Steps to reproduce",
            "hidden": [{"kind": "HTML comment", "text": "hidden"}],
        }

        second = await reconcile(temporal_client, s.task_queue, inp)
        assert second.issues_started == [] and second.errors == [], second
        assert any(x.what == f"issue #{issue['number']}" and x.reason == "running" for x in second.skipped)
        again = await temporal_client.get_workflow_handle(workflow_id).describe()
        assert again.run_id == desc.run_id
    await temporal_client.get_workflow_handle(workflow_id).terminate("test done")


async def test_a_failed_delivery_of_the_github_apps_own_webhook_is_redelivered_once(
    settings: Settings, temporal_client: Client, tmp_path: Path
):
    """A GitHub App deployment has no repository hooks: events arrive through the App's webhook,
    whose deliveries only the App itself (its JWT) may list and redeliver."""
    private, public = app_keys()
    with (
        running_simulator(tmp_path / "sim", app_id=4242, app_public_keys={4242: public}) as sim,
        receiving() as receiver,
    ):
        jwt = {"Authorization": f"Bearer {Auth.AppAuth(4242, private).token}"}
        config = {"url": receiver.url.replace("/hook", "/webhooks/github"), "content_type": "json"}
        with sim.api() as c:
            assert c.patch("/app/hook/config", json=config, headers=jwt).status_code == 200
        receiver.status = 503  # the edge could not hand the event to Temporal
        repo = make_repo(sim, tmp_path)
        with sim.api("alice") as c:
            c.post(f"/repos/{repo}/issues", json={"title": "It breaks"}).raise_for_status()
        sim.wait_idle()
        (guid,) = [r.headers["x-github-delivery"] for r in receiver.received if r.event == "issues"]
        receiver.status = 202

        app = settings.model_copy(
            update={"github_api_url": sim.api_url, "github_app_id": 4242, "github_app_private_key": SecretStr(private)}
        )
        inp = ReconcileInput(repos=[repo], app_hook=True)
        async with reconcile_worker(temporal_client, app, f"issues-{uuid.uuid4().hex[:8]}"):
            first = await reconcile(temporal_client, app.task_queue, inp, record="reconcile-app-hook-redelivered")
            assert [(d.repo, d.guid, d.event) for d in first.redelivered] == [(APP_HOOK, guid, "issues")], first
            assert first.errors == []
            sim.wait_idle()
            assert [r.headers["x-github-delivery"] for r in receiver.received if r.event == "issues"] == [guid, guid]
            second = await reconcile(temporal_client, app.task_queue, inp)
            assert second.redelivered == [] and second.errors == [], second

        # A worker with a token, not the App's key, cannot read the App's webhook: the report says so.
        token = github_settings(settings, sim)
        async with reconcile_worker(temporal_client, token, f"issues-{uuid.uuid4().hex[:8]}"):
            refused = await reconcile(temporal_client, token.task_queue, ReconcileInput(app_hook=True))
        assert [(e.repo, e.step) for e in refused.errors] == [(APP_HOOK, "deliveries")], refused
        assert "SHOPFLOOR_GITHUB_APP_ID" in refused.errors[0].message


async def start_signal(client: Client, workflow_id: str) -> RepoEvent:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    signal = next(
        e.workflow_execution_signaled_event_attributes
        for e in history.events
        if e.HasField("workflow_execution_signaled_event_attributes")
    )
    assert signal.signal_name == "github_event"
    (event,) = await client.data_converter.decode(signal.input.payloads, [RepoEvent])
    return event


async def test_a_repository_that_fails_is_reported_and_the_others_go_on(
    simulator: SimulatorHandle, settings: Settings, temporal_client: Client, tmp_path: Path
):
    repo = make_repo(simulator, tmp_path)
    with simulator.api("acme") as c:
        issue = c.post(f"/repos/{repo}/issues", json={"title": "Fix me", "labels": ["shopfloor"]}).json()
    s = github_settings(settings, simulator)
    issue_queue = f"issues-{uuid.uuid4().hex[:8]}"
    async with reconcile_worker(temporal_client, s, issue_queue):
        inp = ReconcileInput(repos=["acme/missing", repo])
        report = await reconcile(temporal_client, s.task_queue, inp, record="reconcile-repo-failed-issue-started")
    assert {e.repo for e in report.errors} == {"acme/missing"}
    assert all("404" in e.message for e in report.errors), report.errors
    assert report.issues_started == [f"issue/{repo}/{issue['number']}"]
    await temporal_client.get_workflow_handle(report.issues_started[0]).terminate("test done")


def _issue_deliveries(sim: SimulatorHandle, hook_id: int) -> list[dict]:
    return [d for d in sim.deliveries() if d["hook_id"] == hook_id and d["event"] == "issues"]


async def test_an_issue_missed_while_temporal_was_down_reaches_its_workflow(
    simulator: SimulatorHandle, settings: Settings, tmp_path: Path
):
    port = free_port()

    def temporal() -> DevServer:  # the same port and database each time: a restart, not a new server
        return DevServer(port=port, db_file=tmp_path / "temporal" / "db.sqlite", log_file=tmp_path / "temporal.log")

    server = temporal()
    server.start()
    await server.wait_ready()
    issue_queue = f"issues-{uuid.uuid4().hex[:8]}"  # nobody polls it: the issue run stays as started
    edge = github_settings(settings, simulator).model_copy(
        update={
            "temporal_address": server.address,
            "webhook_secret": SecretStr("hook-secret"),
            "task_queue": issue_queue,
        }
    )

    async def get_client() -> Client:  # a fresh connection each time: Temporal comes and goes here
        return await connect(edge, timeout_s=2)

    repo = make_repo(simulator, tmp_path)
    try:
        with serving(create_app(get_client, edge, FileBlobStore(tmp_path / "blobs"), temporal_timeout_s=3)) as url:
            hook_id = add_hook(simulator, repo, f"{url}/webhooks/github", secret="hook-secret")
            server.stop()  # Temporal goes away
            with simulator.api("alice") as c:
                issue = c.post(f"/repos/{repo}/issues", json={"title": "It breaks", "body": "Steps"}).json()
            simulator.wait_idle()
            missed = _issue_deliveries(simulator, hook_id)
            assert [d["status_code"] for d in missed] == [503], missed

            server = temporal()
            server.start()
            await server.wait_ready()
            client = await connect(edge)
            s = edge.model_copy(update={"task_queue": f"reconcile-{uuid.uuid4().hex[:8]}"})
            async with reconcile_worker(client, s, issue_queue):
                report = await reconcile(client, s.task_queue, ReconcileInput(repos=[repo]))
            assert [(d.hook_id, d.guid) for d in report.redelivered] == [(hook_id, missed[0]["guid"])], report
            assert report.issues_started == [] and report.errors == []  # the redelivery did it, not a start
            simulator.wait_idle()
            attempts = _issue_deliveries(simulator, hook_id)
            assert [d["status_code"] for d in attempts] == [503, 202], attempts
            assert attempts[1]["redelivery"] and attempts[1]["guid"] == attempts[0]["guid"]
            handle = client.get_workflow_handle(f"issue/{repo}/{issue['number']}")
            desc = await handle.describe()
            assert desc.workflow_type == "IssueWorkflow" and desc.status == WorkflowExecutionStatus.RUNNING
            await handle.terminate("test done")
    finally:
        server.stop()


async def test_the_schedule_is_created_once_and_only_with_repositories(temporal_client: Client, settings: Settings):
    handle = temporal_client.get_schedule_handle(SCHEDULE_ID)
    assert await ensure_reconcile_schedule(temporal_client, settings) == "not configured"
    with pytest.raises(RPCError) as missing:
        await handle.describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND

    s = settings.model_copy(update={"repos": [REPO], "reconcile_every_minutes": 7})
    try:
        assert await ensure_reconcile_schedule(temporal_client, s) == "created"
        assert await ensure_reconcile_schedule(temporal_client, s) == "updated"
        desc = await handle.describe()
        assert desc.schedule.spec.intervals == [ScheduleIntervalSpec(every=timedelta(minutes=7))]
        assert desc.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
        action = desc.schedule.action
        assert action.workflow == "ReconcileWorkflow" and action.task_queue == s.task_queue
        ids = [x.id async for x in await temporal_client.list_schedules()]
        assert ids.count(SCHEDULE_ID) <= 1  # listing is eventually consistent; never two
    finally:
        await handle.delete()


async def test_a_github_app_gets_the_schedule_without_repositories_and_reconciles_its_webhook(
    temporal_client: Client, settings: Settings
):
    private, _ = app_keys()
    app = settings.model_copy(update={"github_app_id": 4242, "github_app_private_key": SecretStr(private)})
    handle = temporal_client.get_schedule_handle(SCHEDULE_ID)
    try:
        assert await ensure_reconcile_schedule(temporal_client, app) == "created"
        action = (await handle.describe()).schedule.action
        (inp,) = await temporal_client.data_converter.decode(action.args, [ReconcileInput])
        assert inp.app_hook is True and inp.repos == []
    finally:
        await handle.delete()
