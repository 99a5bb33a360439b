"""Replaying recorded workflow histories against the current workflow code (determinism check)."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from shopfloor.worker import SANDBOX, WORKFLOWS


def load_history(path: Path) -> WorkflowHistory:
    """A history as `temporal workflow show --output json` or WorkflowHistory.to_json() writes it."""
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    workflow_id = data.get("workflowId") or path.stem
    return WorkflowHistory.from_json(workflow_id, text)


async def replay(path: Path) -> None:
    """Raise temporalio.workflow.NondeterminismError (or another failure) if the code diverged."""
    replayer = Replayer(
        workflows=WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=SANDBOX,
        # AgentWorkflow too, though a worker runs it unsandboxed: replay is where determinism is checked.
        unsandboxed_workflow_runner=SANDBOX,
    )
    await replayer.replay_workflow(load_history(path))
