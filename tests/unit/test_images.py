"""Images in people's text, the pure parts: which addresses may be fetched (GitHub's own hosts
only) and with credentials or without, what bytes are an image, which models take images, the
notes a text-only model reads, and the parts each provider puts on the wire."""

from __future__ import annotations

import base64
import json

import pytest
from images import png

from shopfloor.activities.providers.anthropic_messages import AnthropicMessagesProvider, to_anthropic_messages
from shopfloor.activities.providers.openai_chat import OpenAIChatProvider, to_openai_message
from shopfloor.agents.hidden_markdown import split_markdown
from shopfloor.agents.images import (
    ImageHosts,
    accepts_images,
    declared_type_refusal,
    omitted_note,
    refused_note,
    sniff,
    text_only,
)
from shopfloor.agents.registry import get_agent
from shopfloor.agents.step import step_request
from shopfloor.agents.untrusted_snapshot import snapshot_text
from shopfloor.blobs import canonical_json
from shopfloor.models.transcript import ImageRef, Message, ModelRequest

pytestmark = pytest.mark.fast

GITHUB = ImageHosts.for_api("https://api.github.com")
SIMULATOR = ImageHosts.for_api("http://127.0.0.1:8100/api/v3")
ENTERPRISE = ImageHosts.for_api("https://ghe.example.com/api/v3")
IMAGE = ImageRef(digest="d" * 64, media_type="image/png", size=2048, number=2)


@pytest.mark.parametrize(
    ("hosts", "url", "credentials"),
    [
        (GITHUB, "https://github.com/user-attachments/assets/3f1c0c7e-8a8e-4b8e-9d55-1a2b3c4d5e6f", True),
        (GITHUB, "https://github.com/acme/shop/assets/12345/3f1c0c7e-8a8e", True),
        (GITHUB, "https://user-images.githubusercontent.com/1/2-abc.png", False),
        (GITHUB, "https://private-user-images.githubusercontent.com/1/2.png?jwt=abc", False),
        (SIMULATOR, "http://127.0.0.1:8100/user-attachments/assets/abc-123", True),
        (ENTERPRISE, "https://ghe.example.com/user-attachments/assets/abc-123", True),
    ],
)
def test_githubs_own_image_addresses_are_allowed(hosts: ImageHosts, url: str, credentials: bool) -> None:
    assert hosts.check(url) == (None, credentials)


@pytest.mark.parametrize(
    ("hosts", "url", "why"),
    [
        (GITHUB, "http://169.254.169.254/latest/meta-data/iam/", "not hosted by GitHub"),
        (GITHUB, "http://127.0.0.1:8100/user-attachments/assets/abc", "not hosted by GitHub"),
        (GITHUB, "https://evil.example/user-attachments/assets/abc", "not hosted by GitHub"),
        (GITHUB, "https://github.com.evil.example/user-attachments/assets/abc", "not hosted by GitHub"),
        (GITHUB, "https://user@github.com/user-attachments/assets/abc", "not an http(s) address"),
        (GITHUB, "http://github.com/user-attachments/assets/abc", "not hosted by GitHub"),
        (GITHUB, "http://user-images.githubusercontent.com/1/2.png", "not hosted by GitHub"),
        (GITHUB, "https://github.com/login?return_to=x", "not an upload on GitHub"),
        (GITHUB, "https://github.com/user-attachments/assets/../../settings", "not an upload on GitHub"),
        (GITHUB, "https://api.github.com/user-attachments/assets/abc", "not hosted by GitHub"),
        (GITHUB, "file:///etc/passwd", "not an http(s) address"),
        (GITHUB, "data:image/png;base64,AAAA", "not an http(s) address"),
        (GITHUB, "https://github.com:8443/user-attachments/assets/abc", "not hosted by GitHub"),
        (SIMULATOR, "http://127.0.0.1:8101/user-attachments/assets/abc", "not hosted by GitHub"),
        (SIMULATOR, "http://localhost:8100/user-attachments/assets/abc", "not hosted by GitHub"),
        (SIMULATOR, "https://github.com/user-attachments/assets/abc", "not hosted by GitHub"),
        (SIMULATOR, "http://127.0.0.1:8100/api/v3/user", "not an upload on GitHub"),
        (ENTERPRISE, "https://user-images.githubusercontent.com/1/2.png", "not hosted by GitHub"),
    ],
)
def test_any_other_address_is_refused(hosts: ImageHosts, url: str, why: str) -> None:
    assert hosts.check(url) == (why, False)


def test_only_the_magic_bytes_make_an_image() -> None:
    assert sniff(png()) == "image/png"
    assert sniff(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff(b"GIF89a....") == "image/gif"
    assert sniff(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff(b"<svg xmlns='http://www.w3.org/2000/svg'/>") is None
    assert sniff(b"<html>") is None
    assert declared_type_refusal("image/png") is None and declared_type_refusal(None) is None
    assert declared_type_refusal("image/svg+xml") == "not a png, jpeg, gif or webp image (image/svg+xml)"
    assert declared_type_refusal("text/html; charset=utf-8") is not None


def test_which_models_take_images() -> None:
    assert accepts_images("openai:gpt-4o-mini") and accepts_images("anthropic:claude-sonnet-4-5")
    assert accepts_images("OpenAI:GPT-4.1")
    assert not accepts_images("openai:o3-mini") and not accepts_images("openai:local-llm")
    assert not accepts_images("scripted:explore-demo")
    assert accepts_images("openai:local-llm", ["openai:local-*"])
    assert not accepts_images("openai:gpt-4o", [])  # the setting replaces the known list


def test_the_notes_name_an_image_by_its_place_never_by_what_its_author_wrote() -> None:
    # Alt text and addresses are hidden content: quoted only under the hidden label (docs/security.md, 11).
    assert omitted_note(IMAGE) == (
        "[an image was omitted: image 2 of the body (image/png, 2 KB); this model reads text only "
        "(its alt text, if any, is among the hidden parts)]"
    )
    assert refused_note(3, "not hosted by GitHub") == "[image 3 of the body was not fetched: not hosted by GitHub]"


def test_a_text_only_model_gets_a_note_in_place_of_each_image() -> None:
    goal = Message(role="user", content="Fix it.", images=[IMAGE, IMAGE.model_copy(update={"number": 3})])
    later = Message(role="user", content="go on")
    out = text_only([goal, later])
    assert out[1] is later and out[0].images == []
    assert out[0].content.startswith("Fix it.\n\n[an image was omitted") and out[0].content.count("omitted") == 2
    plain = [later]
    assert text_only(plain) is plain

    agent = get_agent("triage")
    assert step_request(agent, "m", [goal], text_actions=False).messages[0].images == []
    assert step_request(agent, "m", [goal], text_actions=False, images=True).messages[0].images == [
        IMAGE,
        IMAGE.model_copy(update={"number": 3}),
    ]


def test_images_people_see_are_found_in_the_markdown() -> None:
    split = split_markdown(
        "Crash:\n\n![the dialog](https://github.com/user-attachments/assets/a1)\n\n"
        '<img width="300" alt="Image" src="https://github.com/user-attachments/assets/b2" />\n\n'
        "<details><summary>more</summary>\n\n![hidden](https://github.com/user-attachments/assets/c3)\n\n</details>\n"
        "<!-- ![commented](https://github.com/user-attachments/assets/d4) -->"
    )
    assert [(i.src, i.alt) for i in split.images] == [
        ("https://github.com/user-attachments/assets/a1", "the dialog"),
        ("https://github.com/user-attachments/assets/b2", "Image"),
    ]


def test_a_snapshot_or_message_without_images_keeps_its_stored_form() -> None:
    assert "images" not in json.loads(canonical_json(snapshot_text("t", "no pictures here")))
    assert "images" in json.loads(canonical_json(snapshot_text("t", "![a](https://x/y.png)")))
    assert (
        canonical_json(Message(role="user", content="hi"))
        == b'{"content":"hi","is_error":false,"name":null,"role":"user","tool_call_id":null,"tool_calls":[]}'
    )


def test_each_provider_sends_its_own_image_parts() -> None:
    data = base64.b64encode(png()).decode()
    goal = Message(role="user", content="Fix it.", images=[IMAGE])
    assert to_openai_message(goal, {IMAGE.digest: data}) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Fix it."},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        ],
    }
    assert to_anthropic_messages([goal], {IMAGE.digest: data}) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Fix it."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
            ],
        }
    ]
    # Bytes that could not be read: the note instead, never a broken part.
    assert to_openai_message(goal, {})["content"] == [{"type": "text", "text": "Fix it.\n" + omitted_note(IMAGE)}]


async def test_the_bytes_sent_are_the_bodies_built() -> None:
    data = base64.b64encode(png()).decode()
    request = ModelRequest(
        model="m",
        system="s",
        messages=[Message(role="user", content="Fix it.", images=[IMAGE]), Message(role="user", content="more")],
        image_data={IMAGE.digest: data},
    )
    openai = OpenAIChatProvider("m", "sk-test", "http://127.0.0.1:9/v1")
    anthropic = AnthropicMessagesProvider("m", "sk-test", "http://127.0.0.1:9")
    try:
        for provider in (openai, anthropic):
            for _ in range(2):  # the second from the render cache
                assert json.loads(provider.request_bytes(request)) == provider.request_body(request)
            assert data in provider.request_bytes(request).decode()
    finally:
        await openai.aclose()
        await anthropic.aclose()


def test_a_transcript_shows_which_images_a_message_carried() -> None:
    from shopfloor.cli.transcript import _render

    shown = _render(0, Message(role="user", content="Fix it.", images=[IMAGE]))
    assert shown.splitlines() == [
        "── [0] user",
        "Fix it.",
        f"[image 2 of the body: image/png, 2,048 bytes, blob {IMAGE.digest}]",
    ]


def test_an_image_counts_in_the_context_estimate() -> None:
    from shopfloor.agents.compaction import IMAGE_TOKENS, message_meta

    plain = message_meta(Message(role="user", content="Fix it.")).tokens
    assert (
        message_meta(Message(role="user", content="Fix it.", images=[IMAGE, IMAGE])).tokens == plain + 2 * IMAGE_TOKENS
    )
