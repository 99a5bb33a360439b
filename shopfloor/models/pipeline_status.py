"""Where an issue's, a pull request's or an alert's run stands, as its `status` query answers
(workflows/pipeline_controls.py) and `shopfloor status` prints it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from shopfloor.models.call_waits import CallWait

PipelineKind = Literal["issue", "pull_request", "alert"]
STATUS_QUERY = "status"  # the same name as the agent run's: `shopfloor status` asks either


class PipelineStatus(BaseModel):
    workflow_id: str
    kind: PipelineKind
    repo: str = ""
    number: int | None = None  # the issue or pull request (an alert: the issue it filed)
    started: bool = False  # the pipeline has begun work (an inbox alone has not)
    stage: str = ""  # triage, policy, setup, fix, ci, review, merge, done (an alert: its phase)
    state: str = ""  # running, waiting, merged, parked, failed, cancelled, salvaged, closed
    waiting_for: str | None = None  # what the run waits for, in words
    reason: str | None = None
    pr_number: int | None = None
    pr_url: str | None = None
    head_sha: str | None = None
    cost_usd: float = 0.0  # of its finished agent runs
    paused: bool = False
    stopped_by: str | None = None
    warnings: list[str] = Field(default_factory=list)
    pending: list[CallWait] = Field(default_factory=list)  # tool calls its agent runs wait on an operator for
    agent_runs: list[str] = Field(default_factory=list)  # workflow ids, oldest first
    running_agent: str | None = None  # the one running now, if any

    @property
    def last_agent(self) -> str | None:
        return self.running_agent or (self.agent_runs[-1] if self.agent_runs else None)
