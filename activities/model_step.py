"""The `model_step` activity: one model call of an agent run.

It loads the transcript by digest from the blob store, appends the previous step's tool results,
calls the model, stores the reply and returns references and short previews only, so workflow
history grows by a bounded number of bytes per step however long the conversation gets.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.heartbeat import heartbeating
from shopfloor.activities.providers.base import ModelProvider
from shopfloor.agents.definition import AgentDefinition
from shopfloor.agents.registry import get_agent
from shopfloor.agents.summaries import args_preview, summarize_call
from shopfloor.agents.tools import TOOLS
from shopfloor.blobs import BlobStore, get_json, put_json
from shopfloor.errors import ModelCallError
from shopfloor.models.agent_run import ModelStepInput, ModelStepOutput, ToolCallRef, ToolResult
from shopfloor.models.model_spec import ModelSpec
from shopfloor.models.transcript import Manifest, Message, ModelRequest

log = structlog.get_logger(__name__)

PREVIEW_CHARS = 200
FINAL_TEXT_CHARS = 8_000

ProviderFactory = Callable[[ModelSpec], ModelProvider]


def _canonical_digest(obj: object) -> str:
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


def model_call_failure(exc: ModelCallError) -> ApplicationError:
    """Map a provider failure onto Temporal's retry semantics."""
    return ApplicationError(
        str(exc),
        {"status": exc.status},
        type="ModelCallError" if exc.retryable else "ModelCallRejected",
        non_retryable=not exc.retryable,
        next_retry_delay=timedelta(seconds=exc.retry_after) if exc.retry_after else None,
    )


class ModelStepActivities:
    def __init__(self, blobs: BlobStore, providers: ProviderFactory, *, cache_size: int = 4096) -> None:
        self._blobs = blobs
        self._providers = providers
        # Messages are content-addressed, so a cached one can never be stale.
        self._cache: OrderedDict[str, Message] = OrderedDict()
        self._cache_size = cache_size

    async def _load(self, digest: str) -> Message:
        if digest in self._cache:
            self._cache.move_to_end(digest)
            return self._cache[digest]
        message = Message.model_validate(await get_json(self._blobs, digest))
        self._remember(digest, message)
        return message

    def _remember(self, digest: str, message: Message) -> None:
        self._cache[digest] = message
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def _store(self, message: Message) -> str:
        digest = await put_json(self._blobs, message)
        self._remember(digest, message)
        return digest

    async def _tool_message(self, result: ToolResult, agent: AgentDefinition) -> Message:
        if result.output_digest is None:
            content = result.preview
        else:
            content = (await self._blobs.get(result.output_digest)).decode("utf-8", errors="replace")
        cap = agent.tool_output_cap_chars
        if len(content) > cap:
            content = (
                content[:cap]
                + f"\n[output cut at {cap} of {len(content)} characters; full output is blob {result.output_digest}]"
            )
        return Message(
            role="tool", content=content, tool_call_id=result.call_id, name=result.name, is_error=not result.ok
        )

    @activity.defn(name="model_step")
    async def model_step(self, inp: ModelStepInput) -> ModelStepOutput:
        agent = get_agent(inp.agent)
        spec = ModelSpec.parse(inp.model)
        if inp.transcript is None:
            manifest = Manifest()
            if inp.goal is not None:
                manifest.messages.append(await self._store(Message(role="user", content=inp.goal)))
        else:
            manifest = Manifest.model_validate(await get_json(self._blobs, inp.transcript))
        for result in inp.append:
            manifest.messages.append(await self._store(await self._tool_message(result, agent)))
        messages = list(await asyncio.gather(*(self._load(d) for d in manifest.messages)))

        request = ModelRequest(
            model=spec.model, system=agent.system_prompt(), messages=messages, tools=agent.tool_specs()
        )
        try:
            provider = self._providers(spec)  # a bad cassette or missing key is a non-retryable failure too
            reply = await heartbeating(provider.complete(request), detail=f"{spec} step {inp.step}")
        except ModelCallError as exc:
            log.warning("model call failed", model=str(spec), step=inp.step, retryable=exc.retryable, error=str(exc))
            raise model_call_failure(exc) from exc

        reply_digest = await self._store(reply.message)
        manifest.messages.append(reply_digest)
        transcript = await put_json(self._blobs, manifest)
        text = reply.message.content
        calls = [
            ToolCallRef(
                id=call.id,
                name=call.name,
                summary=summarize_call(call.name, call.arguments),
                args_preview=args_preview(call.arguments) if call.arguments_error is None else "(invalid JSON)",
                args_digest=_canonical_digest({"name": call.name, "arguments": call.arguments}),
                risk=TOOLS[call.name].risk if call.name in TOOLS else "exec",
            )
            for call in reply.message.tool_calls
        ]
        log.info(
            "model step", model=str(spec), step=inp.step, tool_calls=len(calls),
            input_tokens=reply.usage.input_tokens, output_tokens=reply.usage.output_tokens,
        )  # fmt: skip
        return ModelStepOutput(
            transcript=transcript,
            reply_digest=reply_digest,
            text_preview=" ".join(text.split())[:PREVIEW_CHARS],
            final_text=None if calls else text[:FINAL_TEXT_CHARS],
            tool_calls=calls,
            finish_reason=reply.finish_reason,
            usage=reply.usage,
            model_label=provider.label,
        )
