"""Repository policy: `.github/shopfloor.yml` on the default branch, parsed strictly.

A maintainer's typo must not pass silently: unknown keys, wrong types and out-of-range values are
errors that name the key path and the problem. When the file has any error the whole policy falls
back to the safe defaults (never a half-applied file) and the workflow parks and reports the
errors. Pure: no I/O; the activity that reads the file is `activities/github/policy.py`.
"""

from __future__ import annotations

import difflib
import posixpath
import re
import typing
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from shopfloor.agents.host_patterns import check_pattern
from shopfloor.agents.path_glob import first_match
from shopfloor.models.github_reads import POLICY_FILE

POLICY_PATH = POLICY_FILE
MAX_ERRORS = 20  # a file that is wrong everywhere needs the first few messages, not hundreds

AutoFix = Literal["never", "label", "always"]
_LabelName = Field(default=None, min_length=1, max_length=50)  # GitHub caps label names at 50


def _pattern(value: str) -> str:
    if not value.strip() or "\n" in value or len(value) > 200:
        raise ValueError(f"{_show(value)} is not a usable path pattern")
    return value


PathPattern = Annotated[str, AfterValidator(_pattern)]

# Files that steer how every other change is reviewed and merged: this policy, the attributes
# that can hide a diff or pick a merge driver, and the owners GitHub asks for approval. They are
# protected whatever `protected_paths` says, so a policy cannot be loosened into letting agents
# rewrite the rules they run under.
ALWAYS_PROTECTED = ("/" + POLICY_FILE, ".gitattributes", "/CODEOWNERS", "/docs/CODEOWNERS", "/.github/CODEOWNERS")
DEFAULT_PROTECTED = (".github/**", ".gitattributes", "/CODEOWNERS", "/docs/CODEOWNERS")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


ServerName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")]
ToolPattern = Annotated[str, Field(pattern=r"^[A-Za-z0-9_*?-]+\.[A-Za-z0-9_*?-]+$", max_length=100)]


class McpRules(_Strict):
    """`mcp:` — the operator's MCP servers this repository's agents use, and which of their tools
    run without asking (`allow`) or never (`deny`), as `<server>.<tool>` patterns. Other tools of
    those servers wait for an operator."""

    servers: list[ServerName] = Field(default_factory=list, max_length=10)
    allow: list[ToolPattern] = Field(default_factory=list, max_length=100)
    deny: list[ToolPattern] = Field(default_factory=list, max_length=100)


class StepLimits(_Strict):
    """Per-agent `max_steps` overrides; None keeps the agent's own default."""

    triage: int | None = Field(default=None, ge=1, le=200)
    fix: int | None = Field(default=None, ge=1, le=500)
    review: int | None = Field(default=None, ge=1, le=200)
    merge: int | None = Field(default=None, ge=1, le=100)


class CostLimits(_Strict):
    """Per-agent cost caps (USD) for one agent run; None: only the run's budget bounds it."""

    triage: float | None = Field(default=None, gt=0, le=1000)
    fix: float | None = Field(default=None, gt=0, le=1000)
    review: float | None = Field(default=None, gt=0, le=1000)
    merge: float | None = Field(default=None, gt=0, le=1000)


class Budgets(_Strict):
    max_cost_usd_per_run: float | None = Field(default=5.0, gt=0, le=1000)  # None: no cost limit
    max_steps: StepLimits = Field(default_factory=StepLimits)
    max_cost_usd: CostLimits = Field(default_factory=CostLimits)
    # Each agent run's token limit (input + output); a model with no price needs one (here or the
    # operator's SHOPFLOOR_MAX_TOKENS_UNPRICED; the lower wins).
    max_tokens: int | None = Field(default=None, ge=1000, le=100_000_000)
    # The repository's own limits in the spend ledger (the operator's settings apply too: the
    # lower wins). New work past one waits until the UTC day or month rolls over.
    runs_per_day: int | None = Field(default=None, ge=0, le=100_000)
    runs_per_month: int | None = Field(default=None, ge=0, le=1_000_000)
    cost_usd_per_day: float | None = Field(default=None, ge=0, le=1_000_000)
    cost_usd_per_month: float | None = Field(default=None, ge=0, le=10_000_000)


ModelName = Annotated[str, Field(min_length=3, max_length=200, pattern=r"^[a-z][a-z0-9_-]*:\S+$")]


class AgentModels(_Strict):
    """The model each agent uses ("provider:model"); only names the operator allows
    (SHOPFLOOR_REPO_MODELS) are accepted, which the run checks against its settings."""

    triage: ModelName | None = None
    fix: ModelName | None = None
    review: ModelName | None = None
    merge: ModelName | None = None


def _regex(value: str) -> str:
    if not value.strip() or "\n" in value:
        raise ValueError(f"{_show(value)} is not a usable command pattern")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{_show(value)} is not a valid regular expression ({exc})") from None
    return value


CommandPattern = Annotated[str, Field(max_length=300), AfterValidator(_regex)]


class CommandRules(_Strict):
    """Rules the repository adds to the command judge's own: `ask` needs an operator's yes, `deny`
    refuses. Regular expressions searched in each simple command of a command line. They only
    add: a repository cannot allow what the defaults ask about or refuse."""

    ask: list[CommandPattern] = Field(default_factory=list, max_length=50)
    deny: list[CommandPattern] = Field(default_factory=list, max_length=50)


HookCommand = Annotated[str, Field(min_length=1, max_length=2000)]


class AfterEditHook(_Strict):
    """A command run after each edit the agents make (a formatter). With `files`, it runs only
    when an edited path matches one of the globs, and the matching paths are appended to it as
    arguments; without, it runs as written."""

    run: HookCommand
    files: list[PathPattern] | None = Field(default=None, max_length=20)
    timeout_seconds: int = Field(default=120, ge=1, le=600)


class BeforeSubmitHook(_Strict):
    """A command that must pass before an agent may submit its work (a linter, a type check)."""

    run: HookCommand
    timeout_seconds: int = Field(default=300, ge=1, le=600)


class Hooks(_Strict):
    after_edit: list[AfterEditHook] = Field(default_factory=list, max_length=10)
    before_submit: list[BeforeSubmitHook] = Field(default_factory=list, max_length=10)


class Labels(_Strict):
    """Label names by what they mean; None: shopfloor does not set that label."""

    trigger: str = Field(default="shopfloor", min_length=1, max_length=50)  # auto_fix: label
    in_progress: str | None = _LabelName
    needs_human: str | None = _LabelName
    fixed: str | None = _LabelName


class PullRequests(_Strict):
    """Pull requests opened by people (PullRequestWorkflow).

    review: when shopfloor reviews one by itself — `members`: PRs whose author has write access
    (a non-member's PR waits for a writer's `/shopfloor review`: nothing runs on a stranger's
    say-so); `everyone`: every PR; `on_request`: only on `/shopfloor review`.
    merge: shopfloor squash-merges a person's PR once CI is green, its own review approves and
    the approval policy (require_human_approval / auto_merge) is met. Off by default.
    """

    review: Literal["on_request", "members", "everyone"] = "members"
    merge: bool = False


class RepoPolicy(_Strict):
    auto_fix: AutoFix = "label"  # label: the trigger label or a maintainer's `/shopfloor fix`
    fixability_threshold: float = Field(default=0.6, ge=0, le=1)
    require_human_approval: bool = True
    auto_merge: bool = False
    max_review_rounds: int = Field(default=3, ge=1, le=10)
    budgets: Budgets = Field(default_factory=Budgets)
    test_command: str | None = Field(default=None, min_length=1, max_length=500)  # None: detect
    # Commands that prepare the workspace before any agent runs; None: detected, []: none.
    setup: list[HookCommand] | None = Field(default=None, max_length=20)
    setup_timeout_minutes: int = Field(default=20, ge=1, le=120)  # for each setup command
    hooks: Hooks = Field(default_factory=Hooks)
    models: AgentModels = Field(default_factory=AgentModels)
    commands: CommandRules = Field(default_factory=CommandRules)
    approval_timeout_minutes: int = Field(default=60, ge=1, le=10080)  # an unanswered tool call is refused after this
    protected_paths: list[PathPattern] = Field(default_factory=lambda: list(DEFAULT_PROTECTED), max_length=100)
    network_for_commands: bool = False
    code_mode: bool = True  # agents may use run_python (programs that call the read-only tools)
    mcp: McpRules = Field(default_factory=McpRules)
    # Hosts commands may reach besides the package registries, within the operator's bound.
    network_allow: list[Annotated[str, AfterValidator(check_pattern)]] = Field(default_factory=list, max_length=50)
    ci_timeout_minutes: int = Field(default=60, ge=1, le=1440)
    # CI failing on the default branch after shopfloor merged a fix: also open a pull request that
    # reverts the merge (a maintainer merges it; shopfloor never pushes to the default branch).
    revert_on_red_default_branch: bool = False
    labels: Labels = Field(default_factory=Labels)
    pull_requests: PullRequests = Field(default_factory=PullRequests)


class PolicyLoad(BaseModel):
    """The policy a run uses, where it came from, and what was wrong with the file."""

    policy: RepoPolicy = Field(default_factory=RepoPolicy)
    source: Literal["default", "file"] = "default"
    errors: list[str] = Field(default_factory=list)  # non-empty: defaults in force; park and report
    path: str = POLICY_PATH
    ref: str | None = None  # the branch it was read from (the default branch)
    commit: str | None = None  # the default branch's head commit it was read at
    sha: str | None = None  # the file's blob sha

    @property
    def ok(self) -> bool:
        return not self.errors


def within_operator_bounds(load: PolicyLoad, repo_models: list[str]) -> PolicyLoad:
    """The load with the operator's bounds applied: a model the operator does not let repositories
    choose is an error like any other (so the whole file is set aside, never half-applied)."""
    if not load.ok:
        return load
    allowed = ", ".join(f"`{m}`" for m in repo_models) if repo_models else None
    errors = [
        f"`models.{agent}`: `{model}` is not a model this shopfloor lets repositories choose "
        + (f"(allowed: {allowed})" if allowed else "(its operator allows none: SHOPFLOOR_REPO_MODELS is empty)")
        for agent, model in load.policy.models.model_dump().items()
        if model is not None and model not in repo_models
    ]
    if not errors:
        return load
    return load.model_copy(update={"policy": RepoPolicy(), "errors": errors})


# --- parsing ----------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """safe_load without aliases (a policy needs none; they allow billion-laughs files) and
    without silently-overwritten duplicate keys."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            # types-PyYAML leaves peek_event unannotated; it returns the AliasEvent just checked.
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.MarkedYAMLError(problem="aliases (*name) are not allowed in a policy file", problem_mark=mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise yaml.MarkedYAMLError(problem=f"duplicate key `{key}`", problem_mark=key_node.start_mark)
            if isinstance(key, str):
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_policy(text: str | None) -> PolicyLoad:
    """None (no file) -> defaults; an empty file -> defaults from the file; else strict parsing."""
    if text is None:
        return PolicyLoad()
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        return PolicyLoad(source="file", errors=[_yaml_message(exc)])
    if data is None:
        return PolicyLoad(source="file")
    if not isinstance(data, dict):
        return PolicyLoad(source="file", errors=[f"the file must be a mapping of keys to values (got {_show(data)})"])
    try:
        # Strict: YAML already types its values, so "3" for a number or "yes" for a flag is a mistake.
        return PolicyLoad(policy=RepoPolicy.model_validate(data, strict=True), source="file")
    except ValidationError as exc:
        messages = list(dict.fromkeys(_message(e) for e in exc.errors(include_url=False)))
        if len(messages) > MAX_ERRORS:
            messages = [*messages[:MAX_ERRORS], f"... and {len(messages) - MAX_ERRORS} more problems"]
        return PolicyLoad(source="file", errors=messages)


def _yaml_message(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{where}: {problem}"


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + (value if len(value) <= 40 else value[:40] + "…") + '"'
    return "a list" if isinstance(value, list) else "a mapping" if isinstance(value, dict) else type(value).__name__


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The policy model that holds the key at `loc` (for suggestions and bounds)."""
    model: type[BaseModel] = RepoPolicy
    item: type[BaseModel] | None = None  # the model of a list's entries, for an index next
    for part in loc[:-1]:
        if isinstance(part, int) and item is not None:
            model, item = item, None
            continue
        field = model.model_fields.get(str(part))
        sub = field.annotation if field else None
        entries = typing.get_args(sub) if typing.get_origin(sub) is list else ()
        if entries and isinstance(entries[0], type) and issubclass(entries[0], BaseModel):
            item = entries[0]
            continue
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return None
        model = sub
    return model


def _bounds(loc: tuple[Any, ...]) -> str | None:
    model = _model_at(loc)
    field = model.model_fields.get(str(loc[-1])) if model else None
    if field is None:
        return None
    c = {k: getattr(m, k) for m in field.metadata for k in ("ge", "gt", "le", "lt") if getattr(m, k, None) is not None}
    if "ge" in c and "le" in c:
        return f"must be between {c['ge']} and {c['le']}"
    low = f"more than {c['gt']}" if "gt" in c else f"at least {c['ge']}" if "ge" in c else ""
    high = f"at most {c['le']}" if "le" in c else f"less than {c['lt']}" if "lt" in c else ""
    return "must be " + " and ".join(p for p in (low, high) if p)


_TYPES = {
    "bool_type": "must be true or false",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "string_type": "must be text",
    "list_type": "must be a list",
    "model_type": "must be a mapping of keys to values",
    "dict_type": "must be a mapping of keys to values",
}


def _message(err: Any) -> str:
    # pydantic adds the branch tried for `X | None` fields ("int", "str"...): not a key.
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in {"int", "float", "str", "bool", "none"}))
    path = ".".join(str(p) for p in loc)
    kind, got = err["type"], _show(err.get("input"))
    if kind == "extra_forbidden":
        model = _model_at(loc)
        close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields) if model else [], n=1, cutoff=0.6)
        prefix = ".".join(str(p) for p in loc[:-1])
        hint = f" (did you mean `{prefix + '.' if prefix else ''}{close[0]}`?)" if close else ""
        return f"unknown key `{path}`{hint}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"`{path}`: {_bounds(loc) or err['msg']} (got {got})"
    if kind == "literal_error":
        expected = str(err.get("ctx", {}).get("expected", "")).replace("'", "`")
        return f"`{path}`: must be one of {expected} (got {got})"
    if kind in ("string_too_short", "string_too_long"):
        limit = err.get("ctx", {}).get("max_length")
        return f"`{path}`: must not be empty" if kind == "string_too_short" else f"`{path}`: at most {limit} characters"
    if kind == "missing":
        return f"`{path}`: required, and missing"
    if kind == "string_pattern_mismatch" and loc[:1] == ("models",):
        return f"`{path}`: must be a model name such as `anthropic:claude-sonnet-4-5` (got {got})"
    if kind == "too_long":
        return f"`{path}`: at most {err.get('ctx', {}).get('max_length')} entries"
    if kind in _TYPES:
        return f"`{path}`: {_TYPES[kind]} (got {got})"
    return f"`{path}`: {err['msg'].removeprefix('Value error, ')}"


# --- protected paths --------------------------------------------------------------------------


def protected_globs(patterns: list[str] | tuple[str, ...] | None) -> list[str]:
    """The globs in force: ALWAYS_PROTECTED and then a policy's `protected_paths` (None: the
    default list), without repeats."""
    chosen = DEFAULT_PROTECTED if patterns is None else patterns
    return list(dict.fromkeys([*ALWAYS_PROTECTED, *chosen]))


def protected_match(path: str, patterns: list[str] | tuple[str, ...] | None) -> str | None:
    """The glob that protects `path` (relative to the repository root), or None; a path that
    leaves the repository answers "..". `patterns` as for protected_globs."""
    # Relative to the repository root; a leading "/" means the root too.
    norm = posixpath.normpath(path.replace("\\", "/").strip().lstrip("/") or ".")
    if norm in (".", "..") or norm.startswith("../"):
        return ".."
    return first_match(protected_globs(patterns), norm)


def protected_note(patterns: list[str] | tuple[str, ...] | None) -> str:
    """What an agent that changes files is told up front about the protected paths."""
    globs = ", ".join(f"`{g}`" for g in protected_globs(patterns))
    return (
        f"Protected paths (the repository's policy; matched like .gitignore entries): {globs}. Do not create, "
        "change, delete, rename, chmod or link anything they match, with any tool or command: a change that "
        "touches one is never pushed, and the run ends without your fix."
    )


def is_protected(path: str, policy: RepoPolicy) -> bool:
    """Whether agents must leave `path` (relative to the repository root) unchanged.

    The globs match as `.gitignore` entries do (agents/path_glob.py has the rules): a pattern
    without a `/` (`*.lock`) matches a name at any depth; one with a `/` is anchored at the root
    (`.github/**`, `/setup.py`). A pattern that matches a directory protects everything in it
    (`.github` protects `.github/workflows/ci.yml`). A path that leaves the repository is
    protected (never something to allow by accident), and so is every ALWAYS_PROTECTED file.
    """
    return protected_match(path, policy.protected_paths) is not None
