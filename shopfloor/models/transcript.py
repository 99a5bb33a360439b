"""The provider-neutral conversation: messages, tool calls, tool specs and usage.

Providers translate these to and from their own wire formats; the blob store keeps each
message as one JSON blob, and the workflow only ever sees their digests.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "tool_calls", "length", "other"]
Risk = Literal["read", "write", "exec"]
ImageType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]


class ToolCall(BaseModel):
    """One tool call requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # Set when the model sent arguments that are not a JSON object: the tool then answers
    # with an error result the model can read and correct, instead of failing the run.
    arguments_error: str | None = None


class ImageRef(BaseModel):
    """An image a message shows the model: its bytes in the blob store (by digest), never here."""

    digest: str
    media_type: ImageType
    size: int = Field(ge=0)  # bytes
    # Its place among the images of the text it came from (1: the first `[image]`), for notes. Its
    # alt text is not kept here: it is hidden content, quoted only under the hidden label.
    number: int = Field(default=1, ge=1)
    source: str = "the body"  # whose text it is in: "the body", "feedback item 2 (@maria)"


class Message(BaseModel):
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # For role="tool": which call this answers, the tool's name and whether it failed.
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    # A user message's images, after its text (the screenshots in a goal). Left out of the
    # stored form when there are none, so messages without images keep their digests.
    images: list[ImageRef] = Field(default_factory=list, exclude_if=lambda images: not images)


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class ToolSpec(BaseModel):
    """What a model is told about a tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    risk: Risk = "read"


class ModelRequest(BaseModel):
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_output_tokens: int = 4096
    purpose: Literal["step", "compaction"] = "step"  # a compaction asks for a summary, not a turn
    # The bytes of the messages' images, base64, by digest (filled by the model step for a model
    # that accepts images; the messages of a text-only model's request carry none).
    image_data: dict[str, str] = Field(default_factory=dict, repr=False)


class ModelReply(BaseModel):
    message: Message
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)


class Manifest(BaseModel):
    """A transcript as stored: the ordered digests of its messages (one blob per message).

    A manifest may extend an earlier one, its `base`: the transcript is then the base's messages
    followed by these, so a step writes what it added, not the whole list again. `seq` counts the
    manifests since the last whole one (0: this one is whole, as every older manifest is).
    """

    messages: list[str] = Field(default_factory=list)
    base: str | None = None
    seq: int = Field(default=0, ge=0)
