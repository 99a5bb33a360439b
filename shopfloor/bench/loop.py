"""`shopfloor bench loop`: the durable agent loop against the same loop run in memory.

Both sides run the very same activity code (model_step and the tools) against the same fake
model server (OpenAI wire format, fixed latency) and workspace; the durable side schedules them
through a real Temporal dev server and worker, the in-memory side calls them in a plain loop.
The difference per step is what durability costs.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from pydantic import BaseModel
from temporalio.api.history.v1 import History
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.model_step import ModelStepActivities
from shopfloor.activities.tools.activities import ToolActivities
from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.activities.workspace import Workspaces
from shopfloor.blobs import BlobStore, FileBlobStore
from shopfloor.devserver import DevServer, free_port
from shopfloor.models.agent_run import (
    AgentInput,
    Limits,
    ModelStepInput,
    ToolInput,
    ToolResult,
    WorkspaceRef,
)
from shopfloor.settings import Settings
from shopfloor.temporal import connect
from shopfloor.testing import FakeModelServer, ScriptTurn
from shopfloor.worker import ProviderCache, build_worker
from shopfloor.workflows.agent import AgentWorkflow

MODEL = "openai:bench-model"


class LoopRow(BaseModel):
    model_latency_ms: int
    steps: int
    durable_ms_per_step: float
    memory_ms_per_step: float
    overhead_ms_per_step: float
    history_bytes_per_step: int


class ConcurrencyRow(BaseModel):
    runs: int
    steps: int
    durable_steps_per_s: float
    memory_steps_per_s: float


class LoopReport(BaseModel):
    rows: list[LoopRow]
    concurrency: ConcurrencyRow | None = None

    def markdown(self) -> str:
        lines = [
            "| model latency | steps | durable (Temporal) ms/step | in memory ms/step | overhead ms/step | history bytes/step |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r.model_latency_ms} ms | {r.steps} | {r.durable_ms_per_step:.1f} | {r.memory_ms_per_step:.1f} "
            f"| {r.overhead_ms_per_step:+.1f} | {r.history_bytes_per_step} |"
            for r in self.rows
        ]
        if c := self.concurrency:
            lines += [
                "",
                "| concurrent runs on one worker | steps a run | durable steps/s | in memory steps/s |",
                "|---:|---:|---:|---:|",
                f"| {c.runs} | {c.steps} | {c.durable_steps_per_s:.1f} | {c.memory_steps_per_s:.1f} |",
            ]
        return "\n".join(lines)


def _workspace(root: Path) -> Path:
    root.mkdir(parents=True)
    for i in range(4):
        (root / f"module_{i}.py").write_text("".join(f"def f{i}_{n}():\n    return {n}\n" for n in range(100)))
    return root


def _goal(steps: int) -> str:
    return f"bench {steps} steps"


def _script(turn: int, body: dict) -> ScriptTurn:
    """Read a file each turn until the goal's step count, then answer: runs of any length share one server."""
    first_user = next(m for m in body["messages"] if m["role"] == "user")
    steps = int(str(first_user["content"]).split()[1])
    if turn < steps - 1:
        # Distinct arguments each turn: a repeated call would (rightly) trip the doom-loop rule.
        return ScriptTurn.tool("read_file", path=f"module_{turn % 4}.py", offset=1 + turn)
    return ScriptTurn(content="done")


async def _in_memory(
    blobs: BlobStore, providers: ProviderCache, workspace: WorkspaceRef, steps: int
) -> float:
    """The workflow's loop, minus Temporal: same activities, same order, called directly."""
    env = ActivityEnvironment()
    model = ModelStepActivities(TranscriptStore(blobs), providers)
    tools = ToolActivities(blobs, Workspaces(Path(tempfile.mkdtemp(prefix="shopfloor-bench-ws-")), blobs))
    by_name = {"read_file": tools.read_file, "list_dir": tools.list_dir, "glob": tools.glob, "grep": tools.grep}
    transcript: str | None = None
    append: list[ToolResult] = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        out = await env.run(
            model.model_step,
            ModelStepInput(
                agent="explore", model=MODEL, step=step, transcript=transcript,
                goal=_goal(steps) if transcript is None else None, append=append,
            ),
        )  # fmt: skip
        transcript = out.transcript
        if not out.tool_calls:
            break
        append = list(
            await asyncio.gather(
                *(
                    env.run(by_name[c.name], ToolInput(workspace=workspace, reply_digest=out.reply_digest, call_id=c.id, name=c.name))
                    for c in out.tool_calls
                )
            )
        )
    return time.perf_counter() - start


async def bench_loop(
    *, steps: int = 20, latencies_ms: tuple[int, ...] = (0, 500), concurrent: int = 50
) -> LoopReport:
    rows: list[LoopRow] = []
    concurrency: ConcurrencyRow | None = None
    with tempfile.TemporaryDirectory(prefix="shopfloor-bench-") as tmp:
        base = Path(tmp)
        repo = _workspace(base / "repo")
        workspace = WorkspaceRef(repo="local/bench", path=str(repo))
        server = DevServer(port=free_port())
        server.start()
        try:
            await server.wait_ready()
            with FakeModelServer(_script) as fake:
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
                worker = build_worker(client, settings, providers=providers, blobs=blobs)
                async with worker:
                    for latency in latencies_ms:
                        fake.latency_s = latency / 1000
                        # One warm-up run each, so imports and connection pools are not measured.
                        await _durable(client, settings, workspace, 2)
                        await _in_memory(blobs, providers, workspace, 2)
                        durable_s, history = await _durable(client, settings, workspace, steps)
                        memory_s = await _in_memory(blobs, providers, workspace, steps)
                        rows.append(
                            LoopRow(
                                model_latency_ms=latency,
                                steps=steps,
                                durable_ms_per_step=durable_s * 1000 / steps,
                                memory_ms_per_step=memory_s * 1000 / steps,
                                overhead_ms_per_step=(durable_s - memory_s) * 1000 / steps,
                                history_bytes_per_step=history // steps,
                            )
                        )
                    if concurrent:
                        fake.latency_s = 0
                        start = time.perf_counter()
                        await asyncio.gather(*(_durable(client, settings, workspace, steps) for _ in range(concurrent)))
                        durable_s = time.perf_counter() - start
                        start = time.perf_counter()
                        await asyncio.gather(*(_in_memory(blobs, providers, workspace, steps) for _ in range(concurrent)))
                        memory_s = time.perf_counter() - start
                        total = concurrent * steps
                        concurrency = ConcurrencyRow(
                            runs=concurrent, steps=steps,
                            durable_steps_per_s=total / durable_s, memory_steps_per_s=total / memory_s,
                        )  # fmt: skip
                await providers.aclose()
        finally:
            server.stop()
    return LoopReport(rows=rows, concurrency=concurrency)


async def _durable(client, settings: Settings, workspace: WorkspaceRef, steps: int) -> tuple[float, int]:
    inp = AgentInput(agent="explore", model=MODEL, goal=_goal(steps), workspace=workspace, limits=Limits(max_steps=steps))
    start = time.perf_counter()
    handle = await client.start_workflow(
        AgentWorkflow.run, inp, id=f"bench/loop-{uuid.uuid4().hex[:8]}", task_queue=settings.task_queue
    )
    result = await handle.result()
    elapsed = time.perf_counter() - start
    if result.state != "completed":
        raise RuntimeError(f"bench run ended {result.state}: {result.reason}")
    history = await handle.fetch_history()
    return elapsed, History(events=history.events).ByteSize()
