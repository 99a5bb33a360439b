"""Screenshots in an issue reach the models: a person attaches an image to an issue on the GitHub
simulator (at its GitHub-like attachment address), the factory triages it, and the triage agent's
first request to the OpenAI-wire fake carries the image as an image part (a data URL of the very
bytes uploaded) — when the operator lists the model as one that accepts images. A model that does
not gets a note in place of the image, and no image part. Workflow history holds the image's
digest, never its bytes."""

from __future__ import annotations

import base64
import json
from typing import Any

from agent_runs import record_history
from factory_runs import POLICY, TRIAGE, factory, unpriced_model
from images import png

from shopfloor.blobs import digest_of
from shopfloor.testing import FakeModelServer, LoggedRequest, ScriptToolCall, ScriptTurn

NEVER = POLICY.replace("auto_fix: always", "auto_fix: never")  # triage, then park: one agent
TURNS = [ScriptTurn(tool_calls=[ScriptToolCall(name="submit", arguments=TRIAGE)])]


def payloads(history_json: str) -> str:
    """Every payload a history holds, decoded (history JSON carries them base64-encoded)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("data"), str) and "metadata" in node:
                found.append(base64.b64decode(node["data"]).decode("utf-8", "replace"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(history_json))
    return "\n".join(found)


def first_user_content(request: LoggedRequest) -> Any:
    return next(m for m in request.body["messages"] if m["role"] == "user")["content"]


async def triage_an_issue_with_a_screenshot(
    simulator, settings, running_worker, temporal_client, tmp_path, record: str = "", **worker: Any
) -> tuple[list[LoggedRequest], bytes, str]:
    image = png(4, 3, (10, 200, 10))
    url = simulator.attach(image)
    with FakeModelServer(TURNS) as fake:
        async with factory(
            simulator,
            settings,
            running_worker,
            temporal_client,
            tmp_path,
            {},
            NEVER,
            **unpriced_model(fake.openai_base_url, max_tokens=50_000),
            **worker,
        ) as f:
            f.open_issue("add() subtracts", f"add(2, 3) returns -1, see:\n\n![the failing test]({url})\n")
            await f.state_when(lambda s: s.result == "parked", "triage to park under auto_fix: never")
            assert f.handle is not None
            child = temporal_client.get_workflow_handle(f"{f.handle.id}/triage")
            if record:  # the goal-images patch's marker, and a triage run whose goal carries an image
                await record_history(f.handle, f"issue-{record}")
                await record_history(child, f"agent-{record}")
            history = (await f.handle.fetch_history()).to_json()
            triage = (await child.fetch_history()).to_json()
        requests = fake.settled_requests()
    return requests, image, payloads(history) + payloads(triage)


async def test_an_issue_with_an_image_reaches_a_model_that_accepts_images_as_an_image_part(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    requests, image, histories = await triage_an_issue_with_a_screenshot(
        simulator,
        settings,
        running_worker,
        temporal_client,
        tmp_path,
        record="image-triaged",
        image_models=["openai:local-llm"],
    )
    data = base64.b64encode(image).decode()
    assert [r.api for r in requests] == ["openai"]
    content = first_user_content(requests[0])
    assert isinstance(content, list), content
    text, *parts = content
    assert text["type"] == "text" and "The body's image follows this message" in text["text"]
    assert parts == [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}]
    assert digest_of(image) in histories and data not in histories  # history holds the digest only
    attachments = [r for r in simulator.requests() if r["path"].startswith("/user-attachments/")]
    assert attachments and all(r["authorized"] and r["status"] == 200 for r in attachments)


async def test_a_text_only_model_gets_a_note_in_place_of_the_image(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    requests, image, _ = await triage_an_issue_with_a_screenshot(
        simulator, settings, running_worker, temporal_client, tmp_path
    )
    assert [r.api for r in requests] == ["openai"]
    content = first_user_content(requests[0])
    assert isinstance(content, str), content  # plain text: no image part
    assert "[an image was omitted: image 1 of the body (image/png, 1 KB); this model reads text only" in content
    assert "image_url" not in json.dumps(requests[0].body) and base64.b64encode(image).decode() not in content
