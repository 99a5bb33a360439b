"""The spend ledger (LedgerWorkflow `ledger/<task queue>`): what it counts, the limits it keeps, and
the messages pipelines and operators send it.

Runs are counted when admitted, cost as each pipeline reports its cumulative spend; both per
repository and in total, per UTC day and per UTC month. Every message carries the pipeline's key
(its workflow id and first run id), so a retried or repeated message never counts twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

LEDGER_WORKFLOW = "LedgerWorkflow"


def ledger_id(task_queue: str) -> str:
    """One ledger per factory: the workers of one task queue (tests run many side by side)."""
    return f"ledger/{task_queue}"


REQUEST_SIGNAL = "request"
SPEND_SIGNAL = "spend"
ADMISSION_SIGNAL = "ledger_admission"  # the ledger's answer, sent to the pipeline's workflow
LEDGER_QUERY = "ledger"
SET_LIMITS_UPDATE = "set_limits"

LIMIT_FIELDS = ("runs_per_day", "runs_per_month", "cost_usd_per_day", "cost_usd_per_month", "max_running")


class Limits(BaseModel):
    """Limits of one scope (a repository, or everything); None: no limit."""

    runs_per_day: int | None = Field(default=None, ge=0)
    runs_per_month: int | None = Field(default=None, ge=0)
    cost_usd_per_day: float | None = Field(default=None, ge=0)
    cost_usd_per_month: float | None = Field(default=None, ge=0)
    max_running: int | None = Field(default=None, ge=1)  # pipelines at once

    def set_any(self) -> bool:
        return any(getattr(self, f) is not None for f in LIMIT_FIELDS)

    def lower(self, other: Limits) -> Limits:
        """Each limit the lower of the two (a missing one does not count)."""
        values = {}
        for f in LIMIT_FIELDS:
            mine, theirs = getattr(self, f), getattr(other, f)
            values[f] = theirs if mine is None else mine if theirs is None else min(mine, theirs)
        return Limits(**values)

    def overridden_by(self, override: Limits) -> Limits:
        """These limits with each one `override` sets replacing it (an operator's `shopfloor budget`)."""
        return self.model_copy(
            update={f: getattr(override, f) for f in LIMIT_FIELDS if getattr(override, f) is not None}
        )


class Usage(BaseModel):
    runs: int = 0
    cost_usd: float = 0.0


class Account(BaseModel):
    """One scope's counts and what runs in it now."""

    days: dict[str, Usage] = Field(default_factory=dict)  # "YYYY-MM-DD" (UTC)
    months: dict[str, Usage] = Field(default_factory=dict)  # "YYYY-MM"
    running: list[str] = Field(default_factory=list)  # pipeline keys
    override: Limits = Field(default_factory=Limits)  # the operator's, from `shopfloor budget set`


class AdmissionRequest(BaseModel):
    """A pipeline asking to start work. It carries the limits in force where it runs: the
    operator's settings (which `shopfloor budget` overrides) and its repository's policy file."""

    key: str
    workflow_id: str
    repo: str
    operator: Limits = Field(default_factory=Limits)
    repo_file: Limits = Field(default_factory=Limits)
    total: Limits = Field(default_factory=Limits)
    asked_at: datetime | None = None
    round: int = 1  # the pipeline's nth ask (again after it stepped aside to wait for a person)


class AdmissionReply(BaseModel):
    key: str
    round: int = 1  # the request's, so an answer to an earlier ask is told apart
    admitted: bool
    reason: str = ""  # why it waits (empty once admitted)
    waiting_for: Literal["", "budget", "queue"] = ""


class Spend(BaseModel):
    """A pipeline's cumulative cost so far; `final` once it ended (its slot is free)."""

    key: str
    repo: str
    cost_usd: float = Field(default=0.0, ge=0)
    final: bool = False
    # It waits for a person (parked): its slot is free, its run stays counted; it asks again
    # (the same key, the next round) when resumed.
    stepped_aside: bool = False


class LimitChange(BaseModel):
    """`shopfloor budget set`: new operator limits for a repository (or, repo None, for all)."""

    repo: str | None = None
    limits: Limits = Field(default_factory=Limits)
    clear: list[str] = Field(default_factory=list)  # limits to remove (back to the settings' value)


class LedgerState(BaseModel):
    """Everything the ledger knows; also its input across continue-as-new."""

    repos: dict[str, Account] = Field(default_factory=dict)
    total: Account = Field(default_factory=Account)
    pending: list[AdmissionRequest] = Field(default_factory=list)  # in the order they asked
    spent: dict[str, float] = Field(default_factory=dict)  # key -> cumulative cost counted
    admitted: dict[str, str] = Field(default_factory=dict)  # key -> the UTC day it was admitted
    ended: list[str] = Field(default_factory=list)  # recent final keys (a late repeat is ignored)
    aside: list[str] = Field(default_factory=list)  # admitted keys parked for a person: no slot held
    said: dict[str, str] = Field(default_factory=dict)  # key -> the last reason sent (sent once)
    said_kind: dict[str, str] = Field(default_factory=dict)  # key -> "budget" or "queue"
    # The limits last asked under, per repository and in total: what `budget show` reports.
    operator: dict[str, Limits] = Field(default_factory=dict)
    repo_file: dict[str, Limits] = Field(default_factory=dict)
    total_limits: Limits = Field(default_factory=Limits)


class RepoView(BaseModel):
    repo: str
    today: Usage
    month: Usage
    running: int
    queued: list[str]
    limits: Limits  # in force: the operator's (with overrides), lowered by the policy file's
    waiting: dict[str, str] = Field(default_factory=dict)  # workflow id -> why


class LedgerView(BaseModel):
    day: str
    month: str
    total: RepoView
    repos: list[RepoView]
