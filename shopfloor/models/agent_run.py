"""Inputs, outputs and status of one agent run (AgentWorkflow) and of its activities.

Everything here travels through Temporal history, so it holds references (digests) and short
previews only. New fields always get defaults: old histories must still deserialize.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from shopfloor.models.mcp import McpCatalog, McpUse
from shopfloor.models.transcript import ImageRef, Risk, Usage

RunState = Literal["running", "completed", "limit_reached", "stuck", "cancelled", "failed"]
Decision = Literal["allow", "ask", "deny"]


class Lean(BaseModel):
    """A model that goes through history on every step: its JSON leaves out the fields that hold
    their default. A field left out reads back as that default, so the value is the same, and JSON
    with every field (older histories) reads as before. Python dumps (`model_dump()`) keep them.
    So a Lean model's defaults never change once released: a recorded history that left a field
    out would replay with the new default. A different default is a new field."""

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if not info.mode_is_json() or not isinstance(data, dict):
            return data
        for name, default in _defaults(type(self)).items():
            if name in data and getattr(self, name) == default:
                del data[name]
        return data


_DEFAULTS: dict[type[BaseModel], dict[str, Any]] = {}


def _defaults(cls: type[BaseModel]) -> dict[str, Any]:
    """The defaults of `cls`'s optional fields, made once (only compared, never handed out)."""
    found = _DEFAULTS.get(cls)
    if found is None:
        fields = cls.model_fields.items()
        found = {n: f.get_default(call_default_factory=True) for n, f in fields if not f.is_required()}
        _DEFAULTS[cls] = found
    return found


class WorkspaceRef(Lean):
    """Where an agent works.

    Either `path`, a checkout on the worker's own machine that tools use in place (read-only
    agents on a local directory), or a portable ref: any worker rebuilds the workspace by
    fetching `base_sha` from `clone_url` (a mirror is cached per worker) and applying the
    cumulative patch stored in the blob store under `patch_digest` (None: no changes yet).
    """

    repo: str  # "owner/name", or "local/<dir>" for a checkout that is not on GitHub
    path: str | None = None
    clone_url: str | None = None
    base_sha: str | None = None
    patch_digest: str | None = None
    # The prepared environment (setup's virtualenv, node_modules, caches): a blob digest that any
    # worker restores beside the checkout; None: commands run without one.
    environment: str | None = None


class Limits(BaseModel):
    max_steps: int = Field(default=40, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)  # input + output, all steps
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_s: float | None = Field(default=None, gt=0)
    # Circuit breakers (agents/circuit_breakers.py), None: off. A tool's consecutive failed calls,
    # and replies in a row without a successful tool call, that stop the run (warned 2 before).
    max_tool_errors: int | None = Field(default=6, ge=2)
    max_steps_without_progress: int | None = Field(default=8, ge=2)


class CommandHook(BaseModel):
    """A repository's deterministic command around the agents' work (policy `hooks:`)."""

    run: str
    files: list[str] | None = None  # after_edit: only for edited paths matching these globs (appended as arguments)
    timeout_s: float = 120.0


class CommandPolicy(BaseModel):
    """How commands run for this agent (from the repository's policy, never from the model)."""

    network: bool = False
    # Host patterns the repository's policy adds to the sandbox's egress allow-list (the worker
    # keeps only those its operator's bound covers).
    network_allow: list[str] = Field(default_factory=list)
    test_command: str | None = None  # run_tests runs this; None: detect (pytest, npm test, ...)
    timeout_s: float = 600.0
    cpu_s: int = 600
    memory_mb: int = 2048  # for all of a command's processes together (and each one's address space)
    max_processes: int = 512  # processes and threads of one command at once
    scratch_mb: int = 1024  # what one command may write to its /tmp and /dev/shm (on disk)
    output_cap_bytes: int = 200_000
    after_edit: list[CommandHook] = Field(default_factory=list)  # run after each edit (formatters)
    before_submit: list[CommandHook] = Field(default_factory=list)  # must pass before a submit (linters)


class Timeouts(BaseModel):
    """Activity timeouts (seconds). The heartbeat timeout bounds how soon a dead worker's
    in-flight model call is noticed and retried elsewhere."""

    model_call_s: float = 600.0
    model_heartbeat_s: float = 30.0
    tool_s: float = 120.0


class PermissionRules(Lean):
    """Repository overrides of the permission defaults (None: keep the default)."""

    ask_commands: list[str] | None = None
    deny_commands: list[str] | None = None
    protected_paths: list[str] | None = None
    code_mode: bool | None = None  # False: run_python is refused (the policy's `code_mode`)


class ToolResult(Lean):
    """What a tool call came to. The full output lives in the blob store under `output_digest`;
    a short error produced without running anything (unknown tool) has no digest."""

    call_id: str
    name: str
    ok: bool
    preview: str = ""
    output_digest: str | None = None
    output_bytes: int = 0
    workspace: WorkspaceRef | None = None  # the checkpoint after a mutating call
    warning: str | None = None  # e.g. the command ran UNSANDBOXED: shown in the run's status


class StartFrom(BaseModel):
    """Where a run that goes on from another run starts (`shopfloor agent continue` / `fork`): the
    conversation as the model is to see it at this run's first step, and the workspace then.

    The first model step sends `transcript` (None: the conversation starts with the goal) with
    `append` (the tool results that answer its last reply's calls) and `inject` (user messages, such
    as the operator's next message) added, exactly as a step of the run it came from would.
    """

    run_id: str  # the workflow id of the run it came from
    how: Literal["continued", "forked"]
    steps: int = Field(default=0, ge=0)  # steps already taken: this run's first step is steps + 1
    transcript: str | None = None  # manifest digest
    append: list[ToolResult] = Field(default_factory=list)
    inject: list[str] = Field(default_factory=list)
    readable: list[str] = Field(default_factory=list)  # digests of cut outputs read_output may page

    def describe(self) -> str:
        """'continued from ID' / 'forked from ID at step N' (N: the step taken again)."""
        if self.how == "forked":
            return f"forked from {self.run_id} at step {self.steps + 1}"
        return f"continued from {self.run_id}"


class AgentInput(BaseModel):
    agent: str
    model: str  # "provider:model"; never credentials
    goal: str
    workspace: WorkspaceRef
    # The images shown with the goal (the issue's screenshots): digests and small metadata only.
    goal_images: list[ImageRef] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    stage: str = "agent"
    issue: int | None = None
    commands: CommandPolicy = Field(default_factory=CommandPolicy)
    permissions: PermissionRules = Field(default_factory=PermissionRules)
    text_actions: bool = False  # the model has no native tool calling: it writes `Action: tool(...)`
    approval_timeout_s: float = 3600.0  # an unanswered approval is rejected after this
    compaction_budget_tokens: int | None = None  # None: the agent's own
    # Continue as new past this many history events (None: when Temporal suggests it).
    max_history_events: int | None = None
    # The repository's test command (e.g. "python -m pytest -q"): for an agent with
    # submit_requires_command, submit is refused until a call ran it after the last edit.
    required_command: str | None = None
    # Blob digest of the repository's instructions (AGENTS.md, CLAUDE.md, copilot-instructions)
    # read from the default branch: they go into the system prompt (None: none).
    instructions: str | None = None
    carry: dict[str, Any] | None = None  # AgentCarry (shopfloor.agents.run_state) across continue-as-new
    # SandboxFacts (shopfloor.agents.run_environment) detected at the run's start, across continue-as-new.
    environment: dict[str, Any] | None = None
    # Set: this run goes on from another run's conversation and workspace (`workspace` is that
    # checkpoint); its limits count its own steps, its step numbers go on from the other run's.
    start_from: StartFrom | None = None
    # 0: a run started by a pipeline or a person; n: a subagent n delegations down (bounded).
    depth: int = Field(default=0, ge=0)
    # The repository's MCP servers and rules (None: none), and the tools listed when the run
    # started (kept across continue-as-new; None: not listed yet).
    mcp: McpUse | None = None
    mcp_tools: McpCatalog | None = None


class ModelStepInput(Lean):
    agent: str
    model: str
    step: int
    transcript: str | None = None  # manifest digest; None before the first step
    goal: str | None = None  # only on the first step: becomes the first user message
    goal_images: list[ImageRef] = Field(default_factory=list)  # with the goal: its images (digests)
    append: list[ToolResult] = Field(default_factory=list)  # results of the previous step's calls
    inject: list[str] = Field(default_factory=list)  # user messages after them (steering, loop warnings)
    text_actions: bool = False
    permissions: PermissionRules = Field(default_factory=PermissionRules)
    # For agents with an output model (the workflow's record; model_step sees the arguments):
    required_command: str | None = None  # flag the calls that run it (ToolCallRef.runs_required)
    test_command: str | None = None  # the policy's test command: run_tests runs it
    submit_refusal: str | None = None  # set: a submit now is refused with this text
    recorded: dict[str, Any] = Field(default_factory=dict)  # harness values that override the model's
    instructions: str | None = None  # AgentInput.instructions: the repository's, for the system prompt
    # The system prompt's environment section (date, repository, working directory, OS, toolchains,
    # model), rendered by the workflow (agents/run_environment.py); None: none (older runs).
    environment: str | None = None
    # Reply digests of the cut-off replies this one continues: a final answer is them and it, joined.
    continues: list[str] = Field(default_factory=list)
    repo: str = ""  # the run's repository, for the worker's metrics ("": a step recorded before it)
    mcp_specs: str | None = None  # blob digest of the MCP tools' specs offered besides the agent's own


class Delegation(Lean):
    """A `delegate` call as the workflow needs it to start the subagent (model_step validated
    the arguments; agents/subagents.py)."""

    agent: str = "explore"
    prompt: str
    max_steps: int | None = None
    of: int = 1  # delegate calls in the same reply: they run at once and share what is left


class ToolCallRef(Lean):
    id: str
    name: str
    summary: str = ""  # "grep 'Login' in src/": what the UI and CLI show
    args_preview: str = ""
    args_digest: str = ""  # sha256 of the canonical arguments: equal calls have equal digests
    risk: Risk = "read"
    decision: Decision = "allow"
    decision_reason: str = ""
    runs_required: bool = False  # this call runs AgentInput.required_command
    submit_error: str | None = None  # a refused `submit`: the error the model reads
    delegation: Delegation | None = None  # a `delegate` call: the subagent to start


class ModelStepOutput(Lean):
    transcript: str  # manifest digest including the reply
    reply_digest: str
    text_preview: str = ""
    final_text: str | None = None  # the answer (capped) when the model asked for no tools
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = Field(default_factory=Usage)
    model_label: str = ""
    context_tokens: int = 0  # estimated size of the transcript the next step will send
    # Priced by the worker with its price table (settings may override it); histories written
    # before `priced` existed are priced by the workflow with the default table.
    priced: bool = False
    cost_usd: float | None = None  # None when priced: no price is known for the model
    # An accepted `submit`: the validated result (small: bounded fields) and its blob digest.
    output: dict[str, Any] | None = None
    output_digest: str | None = None
    # A final answer that continues cut-off replies: the blob of the whole joined answer.
    answer_digest: str | None = None


class ToolInput(Lean):
    workspace: WorkspaceRef
    reply_digest: str
    call_id: str
    name: str
    run_id: str = ""  # the agent run's workflow id: keys this worker's cached workspace
    commands: CommandPolicy = Field(default_factory=CommandPolicy)
    readable: list[str] = Field(default_factory=list)  # read_output: the digests this run may page through
    # run_python: the rules its program's binding calls are judged by (the same as the run's calls).
    permissions: PermissionRules = Field(default_factory=PermissionRules)


class CompactInput(Lean):
    agent: str
    model: str
    transcript: str
    budget_tokens: int
    force: bool = False  # the provider found the conversation too long: fold even if the estimate fits
    repo: str = ""  # as ModelStepInput.repo


class CompactOutput(Lean):
    transcript: str
    folded: int = 0  # messages summarized (0: nothing to do)
    context_tokens: int = 0
    usage: Usage = Field(default_factory=Usage)
    priced: bool = False
    cost_usd: float | None = None


class PendingApproval(BaseModel):
    call_id: str
    tool: str
    summary: str
    reason: str
    step: int
    since: datetime | None = None  # when the wait started (None: a status from before it was kept)
    until: datetime | None = None  # when an unanswered call is refused


class ApprovalDecision(BaseModel):
    call_id: str | None = None  # None: the only pending call
    note: str = ""


class LimitsRaise(BaseModel):
    max_steps: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_s: float | None = Field(default=None, gt=0)


class ModelSwitch(BaseModel):
    """Switch an agent run's model from its next step on (update `switch_model`; returns the model)."""

    model: str = Field(min_length=3, max_length=200)  # provider:model
    by: str = ""  # who asked, for the record


class StepEvent(BaseModel):
    seq: int
    step: int
    kind: Literal["model", "tool"]
    summary: str
    ok: bool = True
    preview: str = ""


class AgentStatus(BaseModel):
    agent: str
    model: str
    repo: str
    stage: str
    state: RunState = "running"
    step: int = 0
    max_steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    events: list[StepEvent] = Field(default_factory=list)  # the most recent ones only
    final_answer: str | None = None
    reason: str | None = None
    cost_usd: float = 0.0
    paused: bool = False
    pending: list[PendingApproval] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    workspace: WorkspaceRef | None = None
    started_from: str | None = None  # "continued from ID" / "forked from ID at step N"


class AgentResult(BaseModel):
    state: RunState
    steps: int
    usage: Usage = Field(default_factory=Usage)
    final_answer: str | None = None
    final_digest: str | None = None
    transcript: str | None = None
    reason: str | None = None
    workspace: WorkspaceRef | None = None  # the last checkpoint: nothing done is lost, whatever the outcome
    cost_usd: float = 0.0
    # Agents with an output model: the submitted result (validated; harness-recorded fields such
    # as FixResult.tests_passed filled by the harness) and the same JSON in the blob store.
    output: dict[str, Any] | None = None
    output_digest: str | None = None
