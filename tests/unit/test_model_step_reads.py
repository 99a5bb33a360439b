"""model_step reads each transcript blob at most once per worker, and what it sends the model is
still the whole conversation, step after step: the worker that wrote the blobs reads none back, a
worker that takes the run over reads each old one once and then none, and the context size it
reports is the estimate over every message. Real HTTP to the fake model server (OpenAI format),
the real file blob store, the activity run as Temporal's ActivityEnvironment runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recording_blobs import RecordingStore
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.model_step import ModelStepActivities
from shopfloor.activities.providers.base import ModelProvider
from shopfloor.activities.providers.openai_chat import OpenAIChatProvider, to_openai_messages
from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.agents.step import conversation_tokens
from shopfloor.blobs import FileBlobStore
from shopfloor.models.agent_run import ModelStepInput, ModelStepOutput, ToolResult
from shopfloor.models.model_spec import ModelSpec
from shopfloor.testing import FakeModelServer, ScriptTurn

STEPS = 8
TAKEN_OVER_AT = 4  # from this step on, another worker (a fresh store) runs the steps


def script(turn: int, body: dict[str, Any]) -> ScriptTurn:
    if turn < STEPS - 1:
        return ScriptTurn.tool("read_file", f"turn {turn}", path=f"m{turn}.py", offset=turn + 1, limit=5)
    return ScriptTurn(content="done")


async def test_each_blob_is_read_at_most_once_and_the_model_gets_the_whole_conversation(tmp_path: Path) -> None:
    blobs = RecordingStore(tmp_path / "blobs")
    env = ActivityEnvironment()
    with FakeModelServer(script) as srv:
        opened: dict[str, ModelProvider] = {}

        async def providers(spec: ModelSpec) -> ModelProvider:
            return opened.setdefault(str(spec), OpenAIChatProvider(spec.model, "sk-test", srv.openai_base_url))

        worker = ModelStepActivities(TranscriptStore(blobs), providers)
        transcript: str | None = None
        append: list[ToolResult] = []
        reads: list[int] = []
        outputs: list[ModelStepOutput] = []
        try:
            for step in range(1, STEPS + 1):
                if step == TAKEN_OVER_AT:
                    worker = ModelStepActivities(TranscriptStore(blobs), providers)
                blobs.reads.clear()
                out = await env.run(
                    worker.model_step,
                    ModelStepInput(
                        agent="explore",
                        model="openai:fake-model",
                        step=step,
                        transcript=transcript,
                        goal="Find f." if step == 1 else None,
                        append=append,
                    ),
                )
                reads.append(len(blobs.reads))
                outputs.append(out)
                transcript = out.transcript
                append = [
                    ToolResult(call_id=c.id, name=c.name, ok=True, preview=f"result of step {step}")
                    for c in out.tool_calls
                ]
        finally:
            for provider in opened.values():
                await provider.aclose()
        requests = srv.settled_requests()

    # Taken over at step 4: the manifest and the 6 messages so far (goal, 3 × reply and result
    # but the last result, which comes with the step's input), once; no other step reads any.
    assert reads == [0, 0, 0, 1 + 6, 0, 0, 0, 0]
    assert outputs[-1].final_text == "done" and len(requests) == STEPS

    fresh = TranscriptStore(FileBlobStore(tmp_path / "blobs"))
    everything = await fresh.messages(await fresh.manifest(transcript))
    assert len(everything) == 1 + 2 * (STEPS - 1) + 1
    system = requests[0].body["messages"][0]["content"]
    for n, request in enumerate(requests):
        # Step n+1 sends the goal and every reply and result before it, as the provider renders them.
        assert request.body["messages"] == to_openai_messages(system, everything[: 1 + 2 * n])
    for n, out in enumerate(outputs):
        assert out.context_tokens == conversation_tokens(everything[: 2 + 2 * n], system)
