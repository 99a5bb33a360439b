"""`shopfloor run issue OWNER/REPO#N`: put an issue to work without a webhook.

The operator's own trigger: it reads the issue from GitHub (the configured one or, without
credentials, the simulator `shopfloor dev` runs), snapshots its text as the edge would, and signal-with-starts
`issue/<owner>/<repo>/<n>` with an `issues.labeled` event for the trigger label. A running
workflow is just signalled; a finished one is started again (the operator asked for it).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import typer
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from shopfloor.activities.github.api import call_github
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.reconcile import get_issue, synthetic_labeled_event
from shopfloor.blobs import open_blob_store
from shopfloor.cli.common import EXIT_FAILURE, command, fail, load_settings
from shopfloor.cli.simulator import github_or_simulator
from shopfloor.errors import UsageError
from shopfloor.models.inbox import issue_workflow_id
from shopfloor.settings import Settings
from shopfloor.temporal import connect, start_issue_workflow

_ISSUE_REF = re.compile(
    r"^(?P<repo>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100})#(?P<number>[1-9][0-9]{0,9})$"
)


def parse_issue_ref(ref: str) -> tuple[str, int]:
    match = _ISSUE_REF.match(ref.strip())
    if match is None:
        raise UsageError(f"{ref!r} is not an issue reference: write OWNER/REPO#NUMBER, like acme/shop#12")
    return match["repo"], int(match["number"])


def _read_issue(settings: Settings, repo: str, number: int) -> dict[str, Any]:
    clients = GitHubClients(settings)
    try:
        issue = call_github(clients, repo, get_issue, repo, number)
    except ApplicationError as exc:  # every failure, mapped: one message for the operator
        raise UsageError(f"cannot read {repo}#{number} from GitHub: {exc.message}") from None
    finally:
        clients.close()
    if "pull_request" in issue:
        raise UsageError(f"{repo}#{number} is a pull request, not an issue")
    return issue


async def start_issue_run(client: Client, settings: Settings, repo: str, number: int) -> str:
    issue = await asyncio.to_thread(_read_issue, settings, repo, number)
    if issue.get("state") != "open":
        raise UsageError(f"{repo}#{number} is closed; reopen it first")
    blobs = open_blob_store(url=settings.blob_url, data_dir=settings.data_dir, s3_endpoint_url=settings.s3_endpoint_url)
    event = await synthetic_labeled_event(repo, issue, settings.trigger_label, blobs)
    # Each invocation is its own delivery: running it again re-signals, and the workflow decides.
    event = event.model_copy(update={"delivery_id": f"cli:{repo}#{number}:{uuid.uuid4().hex[:12]}"})
    workflow_id = issue_workflow_id(repo, number)
    await start_issue_workflow(client, settings.task_queue, event, new_run=True, started_by="`shopfloor run issue`")
    return workflow_id


def register(app: typer.Typer) -> None:
    run_app = typer.Typer(help="Start factory runs by hand, without a webhook.")
    app.add_typer(run_app, name="run")

    @run_app.command("issue")
    @command
    async def issue(
        ref: str = typer.Argument(..., metavar="OWNER/REPO#N", help="The issue, like acme/shop#12."),
    ) -> None:
        """Put an issue to work: start (or signal) its IssueWorkflow as if it had been labelled."""
        settings = github_or_simulator(load_settings())
        repo, number = parse_issue_ref(ref)
        client = await connect(settings)
        try:
            workflow_id = await start_issue_run(client, settings, repo, number)
        except ApplicationError as exc:
            fail(exc.message, EXIT_FAILURE)
        except RPCError as exc:
            fail(f"Temporal refused the start: {exc.message}", EXIT_FAILURE)
        typer.echo(workflow_id)
        typer.echo(f"ui        {settings.workflow_url(workflow_id)}")
