"""A worker takes no more activities at once than SHOPFLOOR_MAX_CONCURRENT_ACTIVITIES (the rest
wait in the task queue, for it or another worker), and hands a run it cached to other workers
after SHOPFLOOR_STICKY_QUEUE_TIMEOUT_SECONDS."""

from __future__ import annotations

from datetime import timedelta

from agent_runs import sample_repo, start_agent
from harness_runs import explore_input, with_fake

from shopfloor.settings import Settings
from shopfloor.testing import FakeModelServer, ScriptTurn
from shopfloor.worker import ProviderCache, build_worker

LATENCY_S = 0.4  # each model call holds its activity slot at least this long


async def test_one_activity_slot_runs_three_agents_model_calls_one_after_another(
    temporal_client, settings, running_worker, tmp_path
):
    repo = sample_repo(tmp_path / "repo")
    with FakeModelServer([ScriptTurn(content="It greets people.")], latency_s=LATENCY_S) as fake:
        one_slot = with_fake(settings, fake).model_copy(update={"max_concurrent_activities": 1})
        async with running_worker(one_slot):
            handles = [
                await start_agent(temporal_client, explore_input(repo, "openai:fake"), settings.task_queue)
                for _ in range(3)
            ]
            results = [await h.result() for h in handles]
        starts = sorted(r.started for r in fake.requests)

    assert [r.state for r in results] == ["completed"] * 3
    assert len(starts) == 3
    # With one slot, a call reaches the model only once the one before it has been answered.
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    assert all(gap >= LATENCY_S for gap in gaps), gaps


async def test_the_worker_offers_a_dead_workers_runs_to_others_after_the_sticky_timeout(
    temporal_client, settings, blobs
):
    """Not timed here (see `shopfloor bench --only resume`): the setting reaches the SDK's worker."""
    tuned = settings.model_copy(update={"sticky_queue_timeout_seconds": 1.5})
    worker = build_worker(temporal_client, tuned, providers=ProviderCache(tuned), blobs=blobs, strict_sandbox=True)
    assert worker.config()["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=1.5)
    assert Settings().sticky_queue_timeout_seconds == 3.0  # not the SDK's 10 s
