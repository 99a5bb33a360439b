"""The top-level `shopfloor` group, loading each command's module only when that command runs.

Importing every command module (the worker, the simulator, the Temporal client, FastAPI) took
2 to 4 seconds before anything happened, `--help` included. The group lists commands from the
table below, so `shopfloor --help` imports none of them; `shopfloor NAME …` imports NAME's module
alone. Each row's help is the command's own first line (tests/unit/test_cli_lazy.py keeps them
equal), so the listing reads as it did.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# Typer vendors click (typer._click, private): commands and contexts are typed loosely here.
Command = Any
Context = Any


@dataclass(frozen=True)
class Entry:
    module: str  # registers the command on an app: `register(app)`
    help: str


def _m(name: str) -> str:
    return f"shopfloor.cli.{name}"


COMMANDS: dict[str, Entry] = {
    "dev": Entry(
        _m("dev"),
        "Run the whole factory on this machine: Temporal dev server with UI, worker, webhook server, and the "
        "GitHub simulator when no GitHub credentials are configured.",
    ),
    "worker": Entry(
        _m("dev"), "Run a worker alone, against SHOPFLOOR_TEMPORAL_ADDRESS (default: the `shopfloor dev` server)."
    ),
    "webhooks": Entry(_m("dev"), "Run the webhook server alone."),
    "setup": Entry(
        _m("dev"),
        "Register shopfloor's search attributes and the reconcile schedule on a Temporal cluster (idempotent).",
    ),
    "status": Entry(
        _m("status"),
        "Print a run's status: stage, step, state, cost, pending approvals, and the final answer when done.",
    ),
    "follow": Entry(
        _m("follow"),
        "Follow a run live: the model's text as it is written, each tool call as it starts and ends, retries; on a "
        "pipeline, its agent runs one after another. Ctrl-C stops following (the run goes on).",
    ),
    "replay": Entry(
        _m("replay"), "Replay a workflow history against this code: a nondeterminism error means it diverged."
    ),
    "approve": Entry(_m("control"), "Approve a tool call the run (or its agent run) is waiting on."),
    "reject": Entry(
        _m("control"), "Reject a tool call the run (or its agent run) is waiting on; the model is told it was not run."
    ),
    "pause": Entry(
        _m("control"), "Pause before the next step (an issue's or a PR's run: the pipeline and its running agent)."
    ),
    "resume": Entry(_m("control"), "Resume a paused run."),
    "cancel": Entry(
        _m("control"),
        "End the run at the next step boundary, keeping its last checkpoint (an issue's or a PR's run: the pipeline "
        "ends, as `/shopfloor stop` ends it, and its running agent first).",
    ),
    "steer": Entry(_m("control"), "Give the (running) agent a message before its next step, or switch its model."),
    "raise-limits": Entry(
        _m("control"), "Raise a running agent's limits (an issue's or a PR's run: its running agent's)."
    ),
    "simulator": Entry(
        _m("simulator"),
        "Run the GitHub simulator alone: GitHub's REST API, git over HTTP, signed webhooks, simulated CI.",
    ),
    "transcript": Entry(_m("transcript"), "Print an agent run's transcript (running or finished) from the blob store."),
    "demo": Entry(
        _m("demo"),
        "Take a sample bug report from issue to merged fix on this machine: embedded Temporal, the GitHub "
        "simulator, and a scripted model unless SHOPFLOOR_MODEL (or --model) names a real one.",
    ),
    "agent": Entry(
        _m("agent"),
        "Run an agent on a local checkout (`shopfloor agent NAME --repo . --goal ...`), or go on from a run.",
    ),
    "eval": Entry(_m("eval"), "Measure the factory (its fix agent, or all of it) on a task suite, with any model."),
    "bench": Entry(
        _m("bench"),
        "Benchmarks, each measured side by side with its reference in one run. Without a command: all of them, one "
        "table.",
    ),
    "run": Entry(_m("run"), "Start factory runs by hand, without a webhook."),
    "budget": Entry(_m("budget"), "The spend ledger: runs and cost per repository and in total, and their limits."),
}


def load(name: str) -> Command:
    """The real command `name`, built by registering its module on an app of its own."""
    entry = COMMANDS[name]
    module: Any = importlib.import_module(entry.module)
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    module.register(app)

    @app.callback()
    def _group() -> None:  # a callback makes a lone command a group, so it is found by name
        pass

    commands: dict[str, Command] = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    return commands[name]


def every_command() -> Command:
    """The whole command tree, every module imported: for checks that walk it (the README's
    commands table, the deployment's commands), never for a user's call."""
    app = typer.Typer(add_completion=False)
    for module in dict.fromkeys(entry.module for entry in COMMANDS.values()):
        importlib.import_module(module).register(app)
    return typer.main.get_command(app)


class _Listed(TyperCommand):
    """A command as `--help` lists it: its name and help, its module not imported. Running it
    (or asking for its own help) loads the real command and hands over."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any
    ) -> Context:
        return load(self.name or "").make_context(info_name, args, parent=parent, **extra)


class LazyGroup(TyperGroup):
    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        return _Listed(cmd_name, help=entry.help)
