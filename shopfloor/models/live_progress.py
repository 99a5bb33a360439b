"""The live progress activity's input and output, and the query it reads its run's comment by.

While an agent run of an issue's or a pull request's run is going, the `live_progress` activity
(activities/live_progress.py) edits that run's progress comment with the agent's steps; it reads
the rest of the comment from the run with the `progress_base` query.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

# The run's query for its progress comment as it renders it (agents.progress.ProgressBase).
PROGRESS_BASE_QUERY = "progress_base"


class LiveProgressInput(BaseModel):
    repo: str  # owner/name
    number: int = Field(ge=1)  # the issue or pull request the comment is on
    workflow_id: str  # the run that owns the comment (its marker) and answers `progress_base`
    agent_run_id: str  # the agent run whose steps are shown


class LiveProgressOutput(BaseModel):
    # agent_ended: the agent run closed; waiting: it waits for an operator (the run's comment
    # shows the wait; the workflow starts a new live view once it is answered); off: live edits
    # are switched off (SHOPFLOOR_PROGRESS_EDIT_SECONDS=0).
    ended: Literal["agent_ended", "waiting", "off"]
    edits: int = 0  # edits of the comment made
