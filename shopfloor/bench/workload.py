"""The agent workload every agent-loop bench runs, and the two ways of running it.

One explore-agent run reads a small slice of a file a step (distinct arguments each step, so the
doom-loop rule never fires) against a fake model server (OpenAI wire format, latency set at run
time), then answers. The goal names the step count ("bench N steps"), so runs of any length share
one server. Compaction is off (a budget no run reaches): each step is exactly one model call and
one tool call, on both sides.

- durable: AgentWorkflow on a Temporal dev server and a worker, as in production;
- in memory: the same loop (agents/loop.py) calling the same activities (model_step, read_file)
  directly, with nobody at the controls.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.model_step import ModelStepActivities
from shopfloor.activities.tools.activities import ToolActivities
from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.activities.workspace import Workspaces
from shopfloor.agents.loop import AgentLoop, Completed, UnattendedHost
from shopfloor.agents.registry import get_agent
from shopfloor.agents.run_state import AgentCarry
from shopfloor.bench.breakdown import StepBreakdown, StepClock, TimedBlobStore, TimedProviders, Timeline
from shopfloor.blobs import BlobStore, FileBlobStore
from shopfloor.devserver import DevServer, free_port
from shopfloor.models.agent_run import (
    AgentInput,
    CompactInput,
    CompactOutput,
    Limits,
    ModelStepInput,
    ModelStepOutput,
    Timeouts,
    ToolCallRef,
    ToolInput,
    ToolResult,
    WorkspaceRef,
)
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.testing import FakeModelServer, ScriptTurn
from shopfloor.worker import ProviderCache, build_worker, freeze_imports
from shopfloor.workflows.agent import AgentWorkflow

MODEL = "openai:bench-model"
AGENT = "explore"
FILES = 4
FILE_LINES = 200
READ_LINES = 10  # a step's tool output: small, so a 500-step transcript stays cheap to resend
NO_COMPACTION = 10**12  # tokens: no run gets there


def make_workspace(root: Path) -> Path:
    root.mkdir(parents=True)
    for i in range(FILES):
        (root / f"module_{i}.py").write_text(
            "".join(f"def f{i}_{n}():\n    return {n}\n" for n in range(FILE_LINES // 2))
        )
    return root


def goal(steps: int) -> str:
    return f"bench {steps} steps"


def script(turn: int, body: dict[str, Any]) -> ScriptTurn:
    """Read a slice of a file each turn until the goal's step count, then answer."""
    first_user = next(m for m in body["messages"] if m["role"] == "user")
    steps = int(str(first_user["content"]).split()[1])
    if turn < steps - 1:
        # Distinct arguments for 4 × 190 turns in a row: a repeated call would (rightly) trip the
        # doom-loop rule, which looks at the last 20 calls.
        offset = 1 + (turn // FILES) % (FILE_LINES - READ_LINES)
        return ScriptTurn.tool("read_file", path=f"module_{turn % FILES}.py", offset=offset, limit=READ_LINES)
    return ScriptTurn(content="done")


def agent_input(workspace: WorkspaceRef, steps: int, *, heartbeat_s: float | None = None) -> AgentInput:
    timeouts = Timeouts() if heartbeat_s is None else Timeouts(model_heartbeat_s=heartbeat_s)
    return AgentInput(
        agent=AGENT,
        model=MODEL,
        goal=goal(steps),
        workspace=workspace,
        limits=Limits(max_steps=steps),
        timeouts=timeouts,
        compaction_budget_tokens=NO_COMPACTION,
    )


@dataclass
class ChainHistory:
    """Every run of one workflow id, first to last (AgentWorkflow continues as new when Temporal
    suggests it, so a long agent run spans several)."""

    runs: int
    events: list[HistoryEvent]
    bytes: int  # the serialized histories, summed over the runs
    activity_payload_bytes: int  # of which: activity inputs and results


async def chain_history(client: Client, workflow_id: str, first_run_id: str) -> ChainHistory:
    run_id: str | None = first_run_id
    runs, size, payloads = 0, 0, 0
    events: list[HistoryEvent] = []
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        runs += 1
        size += History(events=history.events).ByteSize()
        events += history.events
        for e in history.events:
            if e.HasField("activity_task_scheduled_event_attributes"):
                payloads += e.activity_task_scheduled_event_attributes.input.ByteSize()
            elif e.HasField("activity_task_completed_event_attributes"):
                payloads += e.activity_task_completed_event_attributes.result.ByteSize()
        last = history.events[-1] if history.events else None
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last is not None and last.HasField("workflow_execution_continued_as_new_event_attributes")
            else None
        )
    return ChainHistory(runs=runs, events=events, bytes=size, activity_payload_bytes=payloads)


@dataclass
class DurableRun:
    seconds: float  # start_workflow .. result
    history: ChainHistory | None


@dataclass
class AgentBench:
    """A Temporal dev server, a fake model server and (optionally) an in-process worker."""

    client: Client
    settings: Settings
    workspace: WorkspaceRef
    fake: FakeModelServer
    blobs: BlobStore
    providers: ProviderCache
    base: Path
    server: DevServer

    async def durable(self, steps: int, *, history: bool = True) -> DurableRun:
        start = time.perf_counter()
        handle = await self.client.start_workflow(
            AgentWorkflow.run,
            agent_input(self.workspace, steps),
            id=f"bench/agent-{uuid.uuid4().hex[:10]}",
            task_queue=self.settings.task_queue,
        )
        result = await handle.result()
        elapsed = time.perf_counter() - start
        if result.state != "completed" or result.steps != steps:
            raise RuntimeError(f"bench run ended {result.state} after {result.steps} of {steps} steps: {result.reason}")
        chain = (
            await chain_history(self.client, handle.id, handle.first_execution_run_id or handle.run_id or "")
            if history
            else None
        )
        return DurableRun(seconds=elapsed, history=chain)

    async def in_memory(self, steps: int) -> float:
        """The workflow's own loop (agents/loop.py), minus Temporal: the same activities in the
        same order, called directly. Its seconds; `in_memory_breakdown` says where they went."""
        return (await self.in_memory_breakdown(steps)).total_ms * steps / 1000

    async def in_memory_breakdown(self, steps: int) -> StepBreakdown:
        """`in_memory`, its time per step split into the model call, model_step's rest, the
        tool calls, blob I/O and the loop's own code (shopfloor.bench.breakdown)."""
        env = ActivityEnvironment()
        timeline = Timeline()
        blobs = TimedBlobStore(self.blobs, timeline)
        clock = StepClock(blobs, TimedProviders(self.providers.get, timeline))
        model = ModelStepActivities(TranscriptStore(blobs), clock.providers)
        tools = ToolActivities(blobs, Workspaces(Path(tempfile.mkdtemp(prefix="ws-", dir=self.base)), blobs))
        inp = agent_input(self.workspace, steps)
        loop = AgentLoop(
            inp,
            get_agent(inp.agent),
            AgentCarry(workspace=inp.workspace, limits=inp.limits),
            model=DirectModelStep(env, model, clock),
            tools=DirectToolRunner(env, tools, clock),
            host=UnattendedHost(clock=time.time),
            run_id=f"bench/memory-{uuid.uuid4().hex[:10]}",
        )
        start = time.perf_counter()
        outcome = await loop.run()
        elapsed = time.perf_counter() - start
        if not isinstance(outcome, Completed) or loop.carry.spent.steps != steps:
            raise RuntimeError(f"in-memory bench run ended {outcome} after {loop.carry.spent.steps} of {steps} steps")
        return clock.breakdown(steps, elapsed)


class DirectModelStep:
    """The loop's ModelStep as plain calls of the model activities, timed by `clock`."""

    def __init__(self, env: ActivityEnvironment, activities: ModelStepActivities, clock: StepClock) -> None:
        self.env, self.activities, self.clock = env, activities, clock

    async def step(self, request: ModelStepInput) -> ModelStepOutput:
        output: ModelStepOutput = await self.clock.model(self.env.run(self.activities.model_step, request))
        return output

    async def compact(self, request: CompactInput, *, summary: str) -> CompactOutput:
        output: CompactOutput = await self.clock.model(self.env.run(self.activities.compact_transcript, request))
        return output


class DirectToolRunner:
    """The loop's ToolRunner as plain calls of the tool activities (the agent's are read-only),
    timed by `clock`."""

    def __init__(self, env: ActivityEnvironment, activities: ToolActivities, clock: StepClock) -> None:
        self.env, self.clock = env, clock
        self.by_name = {
            "read_file": activities.read_file,
            "list_dir": activities.list_dir,
            "glob": activities.glob,
            "grep": activities.grep,
            "read_output": activities.read_output,
        }

    async def run(self, call: ToolCallRef, request: ToolInput) -> ToolResult:
        result: ToolResult = await self.clock.tool(self.env.run(self.by_name[call.name], request))
        return result


@asynccontextmanager
async def agent_bench(*, worker: bool = True, latency_s: float = 0.0) -> AsyncIterator[AgentBench]:
    """Everything the agent-loop benches need, on free ports, gone afterwards."""
    with tempfile.TemporaryDirectory(prefix="shopfloor-bench-") as tmp:
        base = Path(tmp)
        workspace = WorkspaceRef(repo="local/bench", path=str(make_workspace(base / "repo")))
        server = DevServer(port=free_port())  # in memory (no db file), no UI
        server.start()
        try:
            await server.wait_ready()
            with FakeModelServer(script, latency_s=latency_s) as fake:
                settings = Settings(
                    temporal_address=server.address,
                    task_queue=f"bench-{uuid.uuid4().hex[:8]}",
                    data_dir=base / "data",
                    openai_base_url=fake.openai_base_url,
                    openai_api_key="bench-not-a-secret",
                )
                client = await connect(settings)
                blobs = FileBlobStore(base / "blobs")
                providers = ProviderCache(settings)
                # As a deployed worker does: the provider's SDK imported, then everything so far
                # kept out of garbage collection, so no full collection rescans the imports mid-run.
                providers.prewarm([MODEL])
                freeze_imports()
                bench = AgentBench(client, settings, workspace, fake, blobs, providers, base, server)
                try:
                    if worker:
                        async with build_worker(client, settings, providers=providers, blobs=blobs):
                            yield bench
                    else:
                        yield bench
                finally:
                    await providers.aclose()
        finally:
            server.stop()
