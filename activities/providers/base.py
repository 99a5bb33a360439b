"""What every model provider offers: one call from shopfloor's messages to a reply.

Providers translate `ModelRequest`/`ModelReply` to and from their own wire formats and raise only
`ModelCallError` for failed calls, so the model_step activity can turn that into Temporal's
retry decision without knowing which SDK was behind it. They stream: `on_text` gets the reply's
text piece by piece as the model writes it (the model activity heartbeats it for the live view).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from shopfloor.errors import ModelCallError
from shopfloor.models.transcript import ModelReply, ModelRequest


class ContextTooLong(ModelCallError):
    """The provider refused the request because the conversation does not fit the model's context
    window. The same request can never succeed, so it is not retried as is; a shorter one (the
    transcript compacted) may."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, retryable=False, status=status)


@runtime_checkable
class ModelProvider(Protocol):
    # Human label for logs and activity summaries: "openai:gpt-4o",
    # "scripted:explore-demo (scripted model)".
    label: str

    async def complete(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelReply:
        """One model call; `on_text` (if given) is called with each piece of text as it arrives.
        Raises ModelCallError (retryable or not) when the call fails, mid-stream included."""
        ...

    async def aclose(self) -> None:
        """Release the HTTP client. Safe to call more than once."""
        ...
