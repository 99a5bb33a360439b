"""A goal's images through model_step, step after step: a model that accepts images gets the
image part (OpenAI) or block (Anthropic) in every request, its bytes read from the blob store once per worker; a text-only
model gets the note every step and its bytes are never read. Real HTTP to the fake model server
(both formats), the real file blob store, the activity run as Temporal's ActivityEnvironment
runs it."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from images import png
from recording_blobs import RecordingStore
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.model_step import ModelStepActivities
from shopfloor.activities.providers.anthropic_messages import AnthropicMessagesProvider
from shopfloor.activities.providers.base import ModelProvider
from shopfloor.activities.providers.openai_chat import OpenAIChatProvider
from shopfloor.activities.transcript_store import TranscriptStore
from shopfloor.models.agent_run import ModelStepInput, ToolResult
from shopfloor.models.model_spec import ModelSpec
from shopfloor.models.transcript import ImageRef
from shopfloor.testing import FakeModelServer, LoggedRequest, ScriptTurn

STEPS = 3


def script(turn: int, body: dict[str, Any]) -> ScriptTurn:
    if turn < STEPS - 1:
        return ScriptTurn.tool("read_file", f"turn {turn}", path=f"m{turn}.py")
    return ScriptTurn(content="done")


async def run_steps(tmp_path: Path, model: str, image_models: list[str]) -> tuple[list[LoggedRequest], list[str], str]:
    blobs = RecordingStore(tmp_path / "blobs")
    image = png(5, 5)
    image_ref = ImageRef(digest=await blobs.put(image), media_type="image/png", size=len(image))
    env = ActivityEnvironment()
    with FakeModelServer(script) as srv:
        opened: dict[str, ModelProvider] = {}

        async def providers(spec: ModelSpec) -> ModelProvider:
            if str(spec) not in opened:
                opened[str(spec)] = (
                    AnthropicMessagesProvider(spec.model, "sk-test", srv.anthropic_base_url)
                    if spec.provider == "anthropic"
                    else OpenAIChatProvider(spec.model, "sk-test", srv.openai_base_url)
                )
            return opened[str(spec)]

        worker = ModelStepActivities(TranscriptStore(blobs), providers, image_models=image_models)
        transcript: str | None = None
        append: list[ToolResult] = []
        try:
            for step in range(1, STEPS + 1):
                out = await env.run(
                    worker.model_step,
                    ModelStepInput(
                        agent="explore",
                        model=model,
                        step=step,
                        transcript=transcript,
                        goal="What does the screenshot show?" if step == 1 else None,
                        goal_images=[image_ref] if step == 1 else [],
                        append=append,
                    ),
                )
                transcript = out.transcript
                append = [ToolResult(call_id=c.id, name=c.name, ok=True, preview="ok") for c in out.tool_calls]
        finally:
            for provider in opened.values():
                await provider.aclose()
        requests = srv.settled_requests()
    return requests, [d for d in blobs.reads if d == image_ref.digest], base64.b64encode(image).decode()


def goal_content(request: LoggedRequest) -> Any:
    return next(m for m in request.body["messages"] if m["role"] == "user")["content"]


async def test_a_model_that_accepts_images_gets_them_every_step_read_once(tmp_path: Path) -> None:
    requests, image_reads, data = await run_steps(tmp_path, "openai:seeing", ["openai:seeing"])
    assert len(requests) == STEPS and len(image_reads) == 1
    for request in requests:
        assert goal_content(request) == [
            {"type": "text", "text": "What does the screenshot show?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        ]


async def test_an_anthropic_model_gets_image_blocks(tmp_path: Path) -> None:
    requests, image_reads, data = await run_steps(tmp_path, "anthropic:seeing", ["anthropic:seeing"])
    assert len(requests) == STEPS and [r.api for r in requests] == ["anthropic"] * STEPS and len(image_reads) == 1
    for request in requests:
        assert goal_content(request)[:2] == [
            {"type": "text", "text": "What does the screenshot show?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
        ]


async def test_a_text_only_model_gets_the_note_every_step_and_the_bytes_are_never_read(tmp_path: Path) -> None:
    requests, image_reads, data = await run_steps(tmp_path, "openai:blind", ["openai:seeing"])
    assert len(requests) == STEPS and image_reads == []
    for request in requests:
        content = goal_content(request)
        assert content.startswith("What does the screenshot show?\n\n[an image was omitted: image 1 of the body")
        assert data not in content
