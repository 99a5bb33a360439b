"""Tool calls waiting for an operator's answer, as an agent run tells its parent run and the parent
shows them: the notice a child sends when a wait starts and ends, and the answer a parent forwards."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

# Signal an agent run sends its parent (IssueWorkflow, PullRequestWorkflow) when a wait starts or ends.
CALL_WAIT_SIGNAL = "call_wait"
# Signal a parent sends the agent run to answer a waiting call (the CLI uses the `approve`/`reject` updates).
ANSWER_CALL_SIGNAL = "answer_call"
# Query of a parent run: the calls its agent runs wait on.
WAITING_CALLS_QUERY = "waiting_calls"

WaitEnd = Literal["approved", "rejected", "timed out", "cancelled"]


class CallWait(BaseModel):
    """One tool call an agent run waits on an operator for."""

    workflow_id: str  # the agent run's: `shopfloor approve <workflow id> --call <call id>`
    agent: str
    call_id: str
    step: int
    summary: str = Field(default="", max_length=300)  # "run_command: pip install foo"
    reason: str = Field(default="", max_length=300)  # why the judge asks
    since: datetime
    until: datetime  # refused if nobody answers by then

    @property
    def key(self) -> str:
        """Call ids repeat across replies (text actions number theirs per reply): the step tells them apart."""
        return f"{self.workflow_id}#{self.step}#{self.call_id}"


class CallWaitNotice(BaseModel):
    """What an agent run signals its parent: a wait started (`ended` None) or ended, and how."""

    wait: CallWait
    ended: WaitEnd | None = None


class EndedWait(BaseModel):
    """A wait that ended, remembered (a few) so a late or repeated notice or answer does nothing."""

    key: str  # CallWait.key
    call_id: str
    ended: WaitEnd


class CallAnswer(BaseModel):
    """An answer a parent run forwards to the agent run that waits (from a maintainer's comment)."""

    call_id: str
    step: int
    approved: bool
    note: str = Field(default="", max_length=500)
