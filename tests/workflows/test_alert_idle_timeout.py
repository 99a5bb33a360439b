"""AlertWorkflow's idle timeout at its real default (thirty days), on Temporal's time-skipping
test server with every workflow task replayed (no cache), GitHub being the simulator: an alert
that resolved before an issue was filed, and never fires again, ends its run idle after thirty
days of workflow time, read from the run's own history."""

from __future__ import annotations

import uuid
from datetime import timedelta

from pydantic import SecretStr
from simulator_runs import BOT_TOKEN
from temporalio.api.enums.v1 import EventType
from workflow_clock import event_times, timer_waits

from shopfloor.models.alert_issue import AlertRunInput, AlertRunOutcome
from shopfloor.models.inbox import ALERT_SIGNAL, ALERT_WORKFLOW, Alert, alert_workflow_id


async def test_a_resolved_alert_that_never_fires_again_ends_idle_after_thirty_days(
    time_skipping_env, time_skipping_settings, time_skipping_worker, simulator
):
    client = time_skipping_env.client
    name, fingerprint = f"shop-{uuid.uuid4().hex[:8]}", f"fp-{uuid.uuid4().hex[:8]}"
    simulator.create_repo("acme", name)
    s = time_skipping_settings.model_copy(
        update={"github_api_url": simulator.api_url, "github_token": SecretStr(BOT_TOKEN)}
    )
    resolved = Alert(
        source="generic",
        fingerprint=fingerprint,
        status="resolved",
        delivery_id="r-1",
        repo=f"acme/{name}",
        summary="checkout returns 500",
        labels={"service": "checkout"},
    )
    async with time_skipping_worker(s):
        # As the edge starts it (signal-with-start), with every timing at its default.
        handle = await client.start_workflow(
            ALERT_WORKFLOW,
            AlertRunInput(source="generic", fingerprint=fingerprint, repo=resolved.repo),
            id=alert_workflow_id("generic", fingerprint),
            task_queue=s.task_queue,
            start_signal=ALERT_SIGNAL,
            start_signal_args=[resolved],
        )
        outcome = AlertRunOutcome.model_validate(await handle.result())

    assert (outcome.state, outcome.phase, outcome.issue_number, outcome.issues_filed) == ("idle", "assessing", None, 0)
    assert outcome.reason == "no notification for 30 days; resolved before an issue was filed"
    assert not [r for r in simulator.requests() if r["method"] == "POST" and r["path"].endswith("/issues")]
    # The wait was thirty days of workflow time, from the firing to the end of the run.
    (fired,) = await event_times(handle, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    (ended,) = await event_times(handle, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    assert timedelta(days=30) <= ended - fired < timedelta(days=30, hours=1)
    assert [t.timeout > timedelta(days=29) for t in await timer_waits(handle)] == [True]
