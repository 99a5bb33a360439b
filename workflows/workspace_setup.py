"""The run's setup stage: the repository's setup commands prepare the base workspace's environment
(one activity, `workspace_setup`), shown on the progress comment, before any agent runs.

An empty plan changes nothing (no activity, no stage). A failed setup ends the run as failed with
the command and the tail of its output (the activity's message); a setup already checkpointed for
the same base, commands and worker kind is reused without running anything.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from shopfloor.models import failure_types
    from shopfloor.models.agent_run import WorkspaceRef
    from shopfloor.models.repo_profile import SetupInput, SetupOutput
    from shopfloor.workflows.activity_catalogue import WORKSPACE_SETUP, call, failure_message, failure_type
    from shopfloor.workflows.pipeline import Final, PipelineContext

# Room around the commands for making the environment, restoring or checkpointing it.
_SETUP_OVERHEAD = timedelta(minutes=10)


def setup_input(ctx: PipelineContext, ws: WorkspaceRef) -> SetupInput:
    """What the activity gets: the plan's commands, the policy's per-command timeout and hosts."""
    return SetupInput(
        workspace=ws,
        commands=list(ctx.profile.setup.commands),
        timeout_s=ctx.policy.setup_timeout_minutes * 60.0,
        network_allow=list(ctx.policy.network_allow),
        run_id=workflow.info().workflow_id,
    )


def plan_text(ctx: PipelineContext) -> str:
    """The plan as the progress comment shows it: where it came from and its commands."""
    plan = ctx.profile.setup
    if plan.source == "policy":
        source = "from .github/shopfloor.yml"
    else:
        source = f"detected ({plan.reason})" if plan.reason else "detected"
    return f"plan {source}: " + "; ".join(plan.commands)


def failure_reason(message: str, tail: int = 200) -> str:
    """The run's reason for a failed setup: which command and how, then the end of its output
    (where pip and npm say what went wrong), short enough for the progress comment's sentence."""
    head, _, output = message.partition("\n")
    output = " ".join(output.split())
    if len(output) > tail:
        output = "…" + output[-tail:]
    return f"setup failed: {head} {output}".strip()


async def prepare_environment(ctx: PipelineContext, ws: WorkspaceRef) -> WorkspaceRef:
    """`ws` with its prepared environment (`environment` set) after running the profile's setup
    plan; `ws` itself when there is no plan. Raises Final("failed") when setup fails."""
    plan = ctx.profile.setup
    if not plan.commands:
        return ws
    inp = setup_input(ctx, ws)
    progress = ctx.progress
    progress.stage("setup")
    progress.outcome(f"setup: running the {plan_text(ctx)}", end=False)
    await progress.show("running")
    # One attempt may take every command's timeout in turn, plus making and keeping the environment.
    timeout = timedelta(seconds=inp.timeout_s * len(inp.commands)) + _SETUP_OVERHEAD
    try:
        out: SetupOutput = await call(
            WORKSPACE_SETUP, inp, summary=f"setup: {len(inp.commands)} command(s)", timeout=timeout
        )
    except ActivityError as exc:
        if failure_type(exc) != failure_types.SETUP_FAILED:
            raise
        reason = failure_reason(failure_message(exc))
        progress.outcome(reason)
        raise Final("failed", reason) from None
    # The result first: the comment's table cuts a long outcome.
    if out.reused:
        progress.outcome(f"setup: reused the prepared environment — {plan_text(ctx)}")
    else:
        progress.outcome(f"setup: {out.commands_run} command(s) in {out.seconds:.0f} s — {plan_text(ctx)}")
    return out.workspace
