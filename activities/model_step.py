"""The model activities: `model_step` (one model call of an agent run) and `compact_transcript`.

model_step loads the transcript by digest, appends the previous step's tool results and any
operator or loop messages, calls the model, stores the reply and returns references and short
previews only, so workflow history grows by a bounded number of bytes per step however long the
conversation gets. Each requested call comes back classed allow / ask / deny, judged in a child
process with a time limit (activities/judging.py): nothing the model sends can hold this
worker's event loop. While the model writes, the activity's heartbeat details carry the text so
far (activities/heartbeat.py), which `shopfloor follow` shows live.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from shopfloor.activities.heartbeat import TextProgress, heartbeating
from shopfloor.activities.judging import CallToJudge, JudgingUnavailable, Judgment, judge_calls
from shopfloor.activities.metrics import AGENT_STEPS, count_model_call, count_tool_call
from shopfloor.activities.providers.base import ContextTooLong, ModelProvider
from shopfloor.activities.providers.wire import RenderCache
from shopfloor.activities.transcript_store import Staged, TranscriptStore
from shopfloor.agents.budget import Price, cost_usd, price_table
from shopfloor.agents.compaction import (
    compaction_message,
    compaction_prompt,
    estimate_tokens,
    folded_model_turns,
    message_meta,
    plan_compaction,
)
from shopfloor.agents.context_limits import joined_answer, mark_cut_off_call
from shopfloor.agents.definition import AgentDefinition
from shopfloor.agents.images import accepts_images, without_images
from shopfloor.agents.permissions import PermissionPolicy
from shopfloor.agents.registry import get_agent
from shopfloor.agents.repo_instructions import RepoInstructions, touched_paths
from shopfloor.agents.repo_instructions import render as render_instructions
from shopfloor.agents.step import judge_reply, step_request, to_permit
from shopfloor.agents.summaries import args_preview
from shopfloor.agents.text_actions import parse_text_actions
from shopfloor.blobs import get_json, put_json
from shopfloor.errors import ModelCallError
from shopfloor.models import failure_types
from shopfloor.models.agent_run import (
    CompactInput,
    CompactOutput,
    ModelStepInput,
    ModelStepOutput,
)
from shopfloor.models.mcp import split_name
from shopfloor.models.model_spec import ModelSpec
from shopfloor.models.transcript import Manifest, Message, ModelReply, ModelRequest, ToolCall, ToolSpec

log = structlog.get_logger(__name__)

PREVIEW_CHARS = 200
FINAL_TEXT_CHARS = 8_000
INSTRUCTIONS_CACHED = 32  # repositories' instructions a worker keeps parsed
IMAGES_CACHED_BYTES = 64 * 1024 * 1024  # of images' base64 a worker keeps (4 images of 5 MB: 27 MB)

# The spec's provider, opened without blocking the event loop (shopfloor.worker.ProviderCache.get).
ProviderFactory = Callable[[ModelSpec], Awaitable[ModelProvider]]


def model_call_failure(exc: ModelCallError) -> ApplicationError:
    """Map a provider failure onto Temporal's retry semantics.

    BENIGN: a provider's failure is expected, and `_complete` logs it in one line; the SDK then
    logs it at debug level instead of a warning with a traceback for every attempt."""
    if isinstance(exc, ContextTooLong):
        # Final as a request; the workflow tells it apart by its type and compacts before a retry.
        return ApplicationError(
            str(exc),
            {"status": exc.status},
            type=failure_types.MODEL_CONTEXT_TOO_LONG,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        )
    return ApplicationError(
        str(exc),
        {"status": exc.status},
        type=failure_types.MODEL_CALL_ERROR if exc.retryable else failure_types.MODEL_CALL_REJECTED,
        non_retryable=not exc.retryable,
        next_retry_delay=timedelta(seconds=exc.retry_after) if exc.retry_after else None,
        category=ApplicationErrorCategory.BENIGN,
    )


class ModelStepActivities:
    def __init__(
        self,
        transcripts: TranscriptStore,
        providers: ProviderFactory,
        prices: Mapping[str, Price] | None = None,
        image_models: Sequence[str] | None = None,
    ) -> None:
        self._transcripts = transcripts
        self._providers = providers
        self._image_models = image_models  # SHOPFLOOR_IMAGE_MODELS; None: the known list
        # Per message object (the transcript store hands out the same one every step): the same
        # noted copy for a text-only model, so the providers' per-message encodings stay cached.
        self._noted = RenderCache(without_images, lambda m: len(m.content))
        self._image_b64: dict[str, str] = {}  # by digest, oldest first, at most IMAGES_CACHED_BYTES
        self._prices = price_table(prices)
        self._repo_instructions: dict[str, RepoInstructions] = {}  # by blob digest, oldest first
        self._mcp_tools: dict[str, tuple[ToolSpec, ...]] = {}  # offered MCP tools' specs, by blob digest

    async def _call(self, spec: ModelSpec, request: ModelRequest, progress: TextProgress) -> tuple[ModelReply, str]:
        provider = await self._providers(spec)
        return await provider.complete(request, on_text=progress.add), provider.label

    async def _complete(
        self, spec: ModelSpec, request: ModelRequest, detail: str, *, repo: str, purpose: str = "step"
    ) -> tuple[ModelReply, str]:
        attempt = activity.info().attempt
        progress = TextProgress(detail, attempt)  # the text so far, in the heartbeats, for the live view
        started = time.monotonic()
        try:
            # A bad cassette or a missing key fails the opening: a non-retryable failure too.
            reply, label = await heartbeating(self._call(spec, request, progress), progress=progress)
        except ModelCallError as exc:
            count_model_call(str(spec), repo, purpose, time.monotonic() - started, None, None)
            log.warning(
                "model call failed",
                model=str(spec),
                detail=detail,
                attempt=attempt,
                retryable=exc.retryable,
                error=str(exc),
            )
            # No cause: Temporal would carry the SDK's exception (its repr) to whoever reads the failure.
            raise model_call_failure(exc) from None
        cost = cost_usd(str(spec), reply.usage, self._prices)
        count_model_call(str(spec), repo, purpose, time.monotonic() - started, reply.usage, cost)
        return reply, label

    @activity.defn(name="model_step")
    async def model_step(self, inp: ModelStepInput) -> ModelStepOutput:
        """Load the conversation, build the request, complete, judge the calls, price the step."""
        agent = get_agent(inp.agent)
        spec = ModelSpec.parse(inp.model)
        manifest, messages, staged = await self._load_conversation(inp, agent)
        writes = [s.written for s in staged]
        images = accepts_images(str(spec), self._image_models)
        try:
            if not images and any(m.images for m in messages):
                messages = [self._noted(m) if m.images else m for m in messages]
            request = step_request(
                agent,
                spec.model,
                messages,
                text_actions=inp.text_actions,
                instructions=await self._instructions(inp, messages),
                environment=inp.environment or "",
                images=images,
                extra_tools=await self._mcp_specs(inp),
            )
            if any(m.images for m in request.messages):
                request.image_data = await self._image_data(request.messages)
            reply, label = await self._complete(spec, request, f"{spec} step {inp.step}", repo=inp.repo)
            await asyncio.gather(*writes)  # written while the model spoke; durable before the reply lists them
        except BaseException:
            for write in writes:  # nobody waits for them now: a failed write is this failure's news, not its own
                write.add_done_callback(_quietly)
            raise
        message = reply.message
        if inp.text_actions and not message.tool_calls:
            # Only line-initial `Action:` lines count, so a recap quoting an old action is not re-run.
            # In a thread: the reply can be long, and the loop must keep answering meanwhile.
            actions = await asyncio.to_thread(parse_text_actions, message.content, agent.tool_names())
            message = message.model_copy(update={"tool_calls": actions})
        if reply.finish_reason == "length":
            message = mark_cut_off_call(message)  # its last call may be cut: not run, the model is told
        reply_digest, transcript = await self._transcripts.append(manifest, message, extends=inp.transcript)
        verdicts = await self._permit(inp, to_permit(agent, message.tool_calls), f"{spec} step {inp.step}")
        calls, output = judge_reply(agent, inp, message.tool_calls, iter(verdicts))
        repo = inp.repo
        AGENT_STEPS.labels(agent=inp.agent, model=str(spec), repo=repo).inc()
        for denied in (c for c in calls if c.decision == "deny"):  # never reach a tool activity
            count_tool_call(denied.name, repo, "denied")
        log.info(
            "model step",
            model=str(spec),
            step=inp.step,
            tool_calls=len(calls),
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
        )
        text = message.content
        answer, answer_digest = text, None
        if inp.continues and not calls:
            answer, answer_digest = await self._joined_answer(inp.continues, text)
        return ModelStepOutput(
            transcript=transcript,
            reply_digest=reply_digest,
            text_preview=" ".join(text.split())[:PREVIEW_CHARS],
            final_text=None if calls else answer[:FINAL_TEXT_CHARS],
            tool_calls=calls,
            finish_reason=reply.finish_reason,
            usage=reply.usage,
            model_label=label,
            # The messages' estimates are kept per message: summing them does not walk the transcript.
            context_tokens=await self._transcripts.tokens(manifest.messages) + estimate_tokens(request.system),
            priced=True,
            cost_usd=cost_usd(inp.model, reply.usage, self._prices),
            output=output,
            output_digest=await put_json(self._transcripts.blobs, output) if output is not None else None,
            answer_digest=answer_digest,
        )

    async def _image_data(self, messages: list[Message]) -> dict[str, str]:
        """The bytes of the messages' images, base64, by digest: read from the blob store once,
        then kept (a run sends its goal's images every step)."""
        digests = list(dict.fromkeys(i.digest for m in messages for i in m.images))
        cached = self._image_b64
        missing = [d for d in digests if d not in cached]
        read = await asyncio.gather(*(self._transcripts.blobs.get(d) for d in missing))
        for digest, data in zip(missing, read, strict=True):
            cached[digest] = base64.b64encode(data).decode("ascii")
        out = {d: cached[d] for d in digests}
        while sum(map(len, cached.values())) > IMAGES_CACHED_BYTES and len(cached) > len(out):
            oldest = next(d for d in cached if d not in out)
            del cached[oldest]
        return out

    async def _joined_answer(self, continues: list[str], last: str) -> tuple[str, str]:
        """The answer that cut-off replies and this last part make, and the digest of its blob."""
        parts = [(await self._transcripts.load(digest)).content for digest in continues]
        answer = Message(role="assistant", content=joined_answer(parts, last))
        return answer.content, await self._transcripts.store(answer)

    async def _instructions(self, inp: ModelStepInput, messages: list[Message]) -> str:
        """The repository's instructions for this step's system prompt ("": none): the stored
        ones (kept per digest), with the nested AGENTS.md nearest to the files touched so far."""
        if not inp.instructions:
            return ""
        stored = self._repo_instructions.get(inp.instructions)
        if stored is None:
            stored = RepoInstructions.model_validate(await get_json(self._transcripts.blobs, inp.instructions))
            while len(self._repo_instructions) >= INSTRUCTIONS_CACHED:
                self._repo_instructions.pop(next(iter(self._repo_instructions)))
            self._repo_instructions[inp.instructions] = stored
        return render_instructions(stored, touched_paths(messages))

    async def _load_conversation(
        self, inp: ModelStepInput, agent: AgentDefinition
    ) -> tuple[Manifest, list[Message], list[Staged]]:
        """The transcript so far, with what this step adds before the model speaks: the goal (first
        step), the previous step's tool results, then the queued notes (steering, loop warnings).
        The added messages are being stored (the writes returned): the caller awaits them."""
        ts = self._transcripts
        manifest = await ts.manifest(inp.transcript)
        messages = await ts.messages(manifest)
        added: list[Message] = []
        if inp.transcript is None and inp.goal is not None:
            added.append(Message(role="user", content=inp.goal, images=inp.goal_images))
        for result in inp.append:
            added.append(await ts.tool_message(result, agent.tool_output_cap_chars))
        added += [Message(role="user", content=text) for text in inp.inject]
        staged = [ts.stage(m) for m in added]
        manifest.messages += [s.digest for s in staged]
        return manifest, [*messages, *(s.message for s in staged)], staged

    async def _mcp_specs(self, inp: ModelStepInput) -> tuple[ToolSpec, ...]:
        """The MCP tools the run was offered when it started (none: no digest)."""
        if not inp.mcp_specs:
            return ()
        cached = self._mcp_tools.get(inp.mcp_specs)
        if cached is None:
            raw = await get_json(self._transcripts.blobs, inp.mcp_specs)
            cached = tuple(ToolSpec.model_validate(s) for s in raw)
            while len(self._mcp_tools) >= INSTRUCTIONS_CACHED:
                self._mcp_tools.pop(next(iter(self._mcp_tools)))
            self._mcp_tools[inp.mcp_specs] = cached
        return cached

    async def _permit(self, inp: ModelStepInput, calls: list[ToolCall], detail: str) -> list[Judgment]:
        """The permission judge's verdicts on `calls`, reached in child processes with a time limit.
        An MCP tool's call is judged by the workflow, which holds the run's MCP rules
        (agents/mcp_rules.py): here it passes."""
        mcp = [split_name(c.name) is not None for c in calls]
        judged = iter(await self._judge(inp, [c for c, is_mcp in zip(calls, mcp) if not is_mcp], detail))
        return [Judgment(decision="allow") if is_mcp else next(judged) for is_mcp in mcp]

    async def _judge(self, inp: ModelStepInput, calls: list[ToolCall], detail: str) -> list[Judgment]:
        if not calls:
            return []
        policy = PermissionPolicy(**inp.permissions.model_dump(exclude_none=True)).model_dump()
        to_judge = [
            CallToJudge(
                tool=c.name,
                arguments=c.arguments,
                policy=policy,
                required_command=inp.required_command,
                test_command=inp.test_command,
            )
            for c in calls
        ]
        try:
            return await heartbeating(judge_calls(to_judge), detail=f"{detail}: judging calls")
        except JudgingUnavailable as exc:
            log.error("tool calls could not be judged", error=str(exc))
            raise ApplicationError(
                f"tool calls could not be judged: {exc}", type=failure_types.JUDGING_UNAVAILABLE
            ) from exc

    @activity.defn(name="compact_transcript")
    async def compact_transcript(self, inp: CompactInput) -> CompactOutput:
        """Fold older messages into one summary written by the model; the newest stay verbatim and
        no tool call is parted from its result. The full messages stay in the blob store."""
        ts = self._transcripts
        manifest = await ts.manifest(inp.transcript)
        messages = await ts.messages(manifest)
        plan = plan_compaction([message_meta(m) for m in messages], budget_tokens=inp.budget_tokens, force=inp.force)
        if plan is None:
            return CompactOutput(transcript=inp.transcript, context_tokens=await ts.tokens(manifest.messages))
        spec = ModelSpec.parse(inp.model)
        folded = "\n\n".join(_render(messages[i]) for i in plan.summarize)
        request = ModelRequest(
            model=spec.model,
            system=compaction_prompt(goal=messages[0].content if messages else None),
            messages=[Message(role="user", content=f"The conversation to summarize:\n\n{folded}")],
            purpose="compaction",
        )
        reply, _ = await self._complete(spec, request, f"{spec} compaction", repo=inp.repo, purpose="compaction")
        turns = sum(1 if messages[i].role == "assistant" else folded_model_turns(messages[i]) for i in plan.summarize)
        summary = compaction_message(reply.message.content, len(plan.summarize), turns)
        kept = [manifest.messages[i] for i in plan.keep]
        new_messages = [kept[0], await ts.store(summary), *kept[1:]]
        transcript = await ts.save(manifest.model_copy(update={"messages": new_messages}))
        log.info("transcript compacted", folded=len(plan.summarize), kept=len(kept))
        return CompactOutput(
            transcript=transcript,
            folded=len(plan.summarize),
            context_tokens=await ts.tokens(new_messages),
            usage=reply.usage,
            priced=True,
            cost_usd=cost_usd(inp.model, reply.usage, self._prices),
        )


def _quietly(write: asyncio.Future[str]) -> None:
    if not write.cancelled():
        write.exception()  # retrieved: asyncio logs no "exception was never retrieved"


def _render(m: Message) -> str:
    if m.role == "assistant" and m.tool_calls:
        calls = "; ".join(f"{c.name}({args_preview(c.arguments)})" for c in m.tool_calls)
        return f"[assistant] {m.content}\n[calls] {calls}"
    if m.role == "tool":
        return f"[result of {m.name}{' (error)' if m.is_error else ''}] {m.content[:4000]}"
    return f"[{m.role}] {m.content}"
