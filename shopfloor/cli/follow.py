"""Following a run as it works (`shopfloor follow ID`; `shopfloor agent` follows the run it starts):
the model's text as it is written, each tool call when it starts and when it ends, and a model call
that fails and is retried; on a pipeline (an issue's, a pull request's run), its agent runs one
after another."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import typer
from pydantic import ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.exceptions import TemporalError
from temporalio.service import RPCError, RPCStatusCode

from shopfloor.cli.common import AGENT_WORKFLOW, EXIT_FAILURE, command, fail, load_settings
from shopfloor.cli.live import PendingCall, pending_calls, retry_line
from shopfloor.models.agent_run import AgentResult, AgentStatus, StepEvent
from shopfloor.models.factory_run import FactoryState
from shopfloor.models.model_progress import TEXT_TAIL_CHARS
from shopfloor.temporal import connect
from shopfloor.workflows.agent import AgentWorkflow

POLL_S = 0.5
START_WAIT_S = 30.0  # how long a named agent run may take to appear on the server
TEXT_INDENT = "    "
FACTORY_QUERY = "factory"  # an issue's or a pull request's run: its FactoryState
PREVIEW_CHARS = 160  # a step event keeps this much of the step's text (spaces collapsed) as its preview


def _print_event(event: StepEvent) -> None:
    mark = "·" if event.kind == "model" else ("✓" if event.ok else "✗")
    typer.echo(f"  {mark} step {event.step:>3}  {event.summary}")
    if event.kind == "tool" and not event.ok and event.preview:
        typer.echo(f"              {event.preview[:140]}")


class LiveView:
    """What one agent run has shown so far, so each poll prints only what is new."""

    def __init__(self, client: Client, handle: WorkflowHandle[Any, Any]) -> None:
        self.client = client
        self.handle = handle
        self.seen = 0  # the last step event printed
        self.step = 0
        self.text_shown: dict[tuple[str, int], int] = {}  # (activity id, attempt) -> characters printed
        self.started: set[str] = set()  # tool activities whose start was printed
        self.retries: set[tuple[str, int]] = set()  # retry lines printed, by (activity id, attempt)
        self.line_open = False  # a line of model text is printed without its end yet
        self.step_text = ""  # the model text printed since the last model event (its last part)

    def _end_text_line(self) -> None:
        if self.line_open:
            typer.echo("")
            self.line_open = False

    def _say(self, line: str) -> None:
        self._end_text_line()
        typer.echo(line)

    def _write_text(self, text: str) -> None:
        """Model text as it comes: indented, a partial line left open until the rest arrives."""
        self.step_text = (self.step_text + text)[-TEXT_TAIL_CHARS:]
        for i, part in enumerate(text.split("\n")):
            if i > 0:
                typer.echo("")
                self.line_open = False
            if part:
                typer.echo(part if self.line_open else TEXT_INDENT + part, nl=False)
                self.line_open = True
        sys.stdout.flush()

    async def poll(self) -> None:
        """Print the run's new step events, then what its pending activities show now."""
        try:
            status = await self.handle.query(AgentWorkflow.status)
        except RPCError:
            status = None  # no worker has picked the run up yet
        if status is not None:
            self._events(status)
        try:
            description = await self.handle.describe()
        except RPCError:
            return
        for call in await pending_calls(self.client, description):
            self._pending(call)

    def _events(self, status: AgentStatus) -> None:
        self.step = status.step
        for event in status.events:
            if event.seq > self.seen:
                self._say_event(event)
                self.seen = event.seq

    def _say_event(self, event: StepEvent) -> None:
        if event.kind == "model":
            self._finish_text(event.preview)
        self._end_text_line()
        _print_event(event)

    def _finish_text(self, preview: str) -> None:
        """The model's step ended before the last look saw all its text: the rest of it, as far as
        the step's preview (its first PREVIEW_CHARS characters, spaces collapsed) tells it."""
        shown, self.step_text = " ".join(self.step_text.split()), ""
        if not shown or len(shown) >= len(preview) or not preview.startswith(shown):
            return
        rest = preview[len(shown) :]
        if not self.line_open:
            rest = rest.lstrip()
        self._write_text(rest + (" …" if len(preview) >= PREVIEW_CHARS else ""))

    def _pending(self, call: PendingCall) -> None:
        line = retry_line(call)
        if line is not None and (call.activity_id, call.attempt) not in self.retries:
            self.retries.add((call.activity_id, call.attempt))
            self._say(f"  ! {line}")
        if call.is_model:
            self._text(call)
        elif call.running and call.activity_id not in self.started:
            self.started.add(call.activity_id)
            self._say(f"  ▸ step {self.step:>3}  {call.activity_type} running")

    def _text(self, call: PendingCall) -> None:
        progress = call.progress
        if progress is None or not progress.chars:
            return
        key = (call.activity_id, progress.attempt)
        new, lost = progress.after(self.text_shown.get(key, 0))
        if not new:
            return
        if lost:
            self._end_text_line()
            self._write_text("…")
        self._write_text(new)
        self.text_shown[key] = progress.chars

    def close(self) -> None:
        self._end_text_line()


async def follow_run(client: Client, workflow_id: str) -> AgentResult:
    """Print agent run `workflow_id` as it works until it ends; its result (WorkflowFailureError
    when it failed)."""
    handle = client.get_workflow_handle_for(AgentWorkflow.run, workflow_id)
    view = LiveView(client, handle)
    result_task = asyncio.create_task(handle.result())
    try:
        while True:
            await view.poll()
            done, _ = await asyncio.wait({result_task}, timeout=POLL_S)
            if done:
                await view.poll()
                view.close()
                return result_task.result()
    finally:
        view.close()
        result_task.cancel()


def failure_text(exc: WorkflowFailureError) -> str:
    """The innermost cause of a failed run: the sentence that says what went wrong."""
    cause: BaseException | None = exc.cause
    while isinstance(cause, TemporalError) and cause.cause is not None:
        cause = cause.cause
    return str(cause)


async def _started(client: Client, workflow_id: str) -> bool:
    """Whether agent run `workflow_id` exists, waiting up to START_WAIT_S for it: a pipeline names
    its next run in its state a moment before the server has started it."""
    handle = client.get_workflow_handle(workflow_id)
    deadline = asyncio.get_running_loop().time() + START_WAIT_S
    while True:
        try:
            await handle.describe()
            return True
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND or asyncio.get_running_loop().time() >= deadline:
                return False
        await asyncio.sleep(POLL_S)


async def _follow_agent(client: Client, workflow_id: str) -> bool:
    """Follow one agent run to its end and say how it ended; whether it completed."""
    if not await _started(client, workflow_id):
        typer.echo(f"agent run {workflow_id} was not started (the pipeline may have been stopped first)", err=True)
        return False
    try:
        result = await follow_run(client, workflow_id)
    except WorkflowFailureError as exc:
        typer.echo(f"failed: {failure_text(exc)}", err=True)
        return False
    if result.state == "completed":
        # An agent with an output model ends with its submitted result, not a text answer.
        answer = json.dumps(result.output, indent=2) if result.output is not None else result.final_answer
        typer.echo(f"\n{answer or '(no answer)'}\n")
        typer.echo(f"completed after {result.steps} steps")
        return True
    typer.echo(f"ended: {result.state}: {result.reason}")
    return False


async def _agent_runs(handle: WorkflowHandle[Any, Any]) -> tuple[list[str], set[str]]:
    """The pipeline's agent runs in the order it started them (its `factory` query; an alert's
    run, which has none, gives its running ones), and those running now."""
    description = await handle.describe()
    running = [
        c.workflow_id for c in description.raw_description.pending_children if c.workflow_type_name == AGENT_WORKFLOW
    ]
    try:
        state = await handle.query(FACTORY_QUERY, result_type=FactoryState)
    except (WorkflowQueryFailedError, RPCError, ValidationError):
        return running, set(running)
    return [*state.children, *(c for c in running if c not in state.children)], set(running)


async def _follow_pipeline(client: Client, handle: WorkflowHandle[Any, Any], kind: str) -> bool:
    """Follow a pipeline's agent runs, the one running now and each one after it (also one that
    ended between two looks), until the pipeline ends."""
    children, running = await _agent_runs(handle)
    followed = {c for c in children if c not in running}  # what ended before we came
    typer.echo(f"{kind} {handle.id}: following its agent runs")
    while True:
        children, _ = await _agent_runs(handle)
        new = [c for c in children if c not in followed]
        if new:
            followed.add(new[0])
            typer.echo(f"\nfollowing agent run {new[0]}")
            await _follow_agent(client, new[0])
            continue
        status = (await handle.describe()).status
        if status not in (None, WorkflowExecutionStatus.RUNNING):
            typer.echo(f"\n{kind} {handle.id} ended: {status.name.lower()}")
            return status == WorkflowExecutionStatus.COMPLETED
        await asyncio.sleep(POLL_S)


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def follow(workflow_id: str = typer.Argument(..., metavar="ID", help="An agent run or a pipeline.")) -> None:
        """Follow a run live: the model's text as it is written, each tool call as it starts and
        ends, retries; on a pipeline, its agent runs one after another. Ctrl-C stops following
        (the run goes on)."""
        settings = load_settings()
        client = await connect(settings)
        handle = client.get_workflow_handle(workflow_id)
        try:
            described = await handle.describe()
        except RPCError as exc:
            fail(f"no workflow {workflow_id!r}: {exc.message}", EXIT_FAILURE)
        if described.workflow_type == AGENT_WORKFLOW:
            typer.echo(f"following agent run {workflow_id}")
            ok = await _follow_agent(client, workflow_id)
        else:
            ok = await _follow_pipeline(client, handle, described.workflow_type)
        typer.echo(settings.workflow_url(workflow_id))
        if not ok:
            raise typer.Exit(EXIT_FAILURE)
