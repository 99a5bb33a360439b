"""`shopfloor demo`: one bug report taken from issue to merged fix, on this machine, with nothing
to set up.

It starts the embedded stack `shopfloor dev` runs (Temporal dev server with UI, worker, webhook
server, GitHub simulator) on free ports with a throw-away data dir, creates the sample repository
shipped in `shopfloor/demo/sample_repo` (a small package with a real bug and a failing test) on the
simulator, opens an issue about the bug as the user `alice`, and follows the IssueWorkflow that
the simulator's webhook starts until it ends: triage, policy gate, fix, pull request, CI, review,
merge. Then it prints a timeline (per stage: duration, steps, tokens, cost) and the Temporal UI
link of every workflow.

Models: the scripted cassettes in `shopfloor/demo/cassettes` unless a real model is named
(`--model`, or SHOPFLOOR_MODEL naming a non-scripted model), which then runs every agent.
GitHub credentials and SHOPFLOOR_TEMPORAL_ADDRESS are ignored: the demo never leaves this machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from importlib import resources
from pathlib import Path

import httpx
import typer
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from shopfloor.agents.progress import WAITING_FOR, ProgressView, TimelineEntry
from shopfloor.cli.common import EXIT_FAILURE, command, load_settings, usable_model
from shopfloor.cli.dev import Stack, running_stack
from shopfloor.devserver import free_port
from shopfloor.logs import configure_logging
from shopfloor.models.agent_run import AgentStatus
from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import issue_workflow_id
from shopfloor.settings import Settings

OWNER, NAME = "demo", "pricing"
REPO = f"{OWNER}/{NAME}"
REPORTER = "alice"  # a user with no access to the repository, as most reporters are
TEST_COMMAND = "python -m unittest -v"  # the standard library's runner: works on a fresh install
ISSUE_TITLE = "Bulk discount is not applied to exactly 10 items"
ISSUE_BODY = """\
The README says a line of 10 or more of the same item gets 10% off, but a line of exactly
10 items is charged in full:

```python
>>> from pricing import line_total
>>> line_total(100, 10)
1000
```

I expected 900. With 11 items the discount is there (`line_total(100, 11)` is 990).
`tests/test_cart.py` has a test for this case and it fails on main.
"""
AGENTS = ("triage", "fix", "review")
POLL_S = 0.4
STAGE_TEXT = {
    "triage": "an agent reads the issue and the code: kind, severity, labels, fixability",
    "policy": "the repository's .github/shopfloor.yml decides whether shopfloor may fix it",
    "fix": "an agent changes the code in a sandboxed checkout and must run the tests",
    "ci": "the branch is pushed, the pull request opened, and CI runs on it",
    "review": "an agent reviews the pull request",
    "merge": "squash-merge once CI, review and the policy allow it",
}
EXIT_INTERRUPTED = 130


def _material(name: str) -> Path:
    """A folder of package data (`shopfloor/demo/<name>`), installed as plain files."""
    return Path(str(resources.files("shopfloor.demo").joinpath(name)))


def _cassettes() -> dict[str, str]:
    return {agent: f"scripted:{_material('cassettes') / f'{agent}.json'}" for agent in AGENTS}


def _choose_model(model: str | None, settings: Settings) -> str | None:
    """The real model every agent runs on, or None for the demo's scripted cassettes."""
    if model is None:
        from_env = os.environ.get("SHOPFLOOR_MODEL", "").strip()
        if not from_env or from_env.startswith("scripted:"):
            return None
        model = from_env
    spec = usable_model(settings, model, called_here=True)
    return str(spec)


def _demo_settings(base: Settings, data_dir: Path, model: str | None) -> Settings:
    """The user's settings (models, keys, sandbox, prices, logs) on a stack of the demo's own:
    embedded Temporal, the simulator instead of any GitHub, free ports, a throw-away data dir."""
    ports: list[int] = []
    while len(ports) < 4:
        if (port := free_port()) not in ports:
            ports.append(port)
    temporal_port, ui_port, webhook_port, simulator_port = ports
    return base.model_copy(
        update={
            "temporal_address": None,
            "temporal_namespace": "default",
            "temporal_api_key": None,
            "temporal_tls": False,
            "temporal_port": temporal_port,
            "temporal_ui_port": ui_port,
            "task_queue": "shopfloor",
            "data_dir": data_dir,
            "blob_url": None,
            "s3_endpoint_url": None,
            "model": model or "scripted:explore-demo",
            "agent_models": {} if model else _cassettes(),
            "webhook_host": "127.0.0.1",
            "webhook_port": webhook_port,
            "webhook_secret": None,
            "factory_pipeline": True,
            "repos": [],
            "alert_routes": {},
            "alert_token": None,
            "github_api_url": "https://api.github.com",
            "github_token": None,
            "github_app_id": None,
            "github_app_private_key": None,
            "github_app_private_key_file": None,
            "github_bot_login": "shopfloor[bot]",
            "simulator_host": "127.0.0.1",
            "simulator_port": simulator_port,
        }
    )


class Clock:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def say(self, text: str, indent: int = 0) -> None:
        typer.echo(f"[{time.monotonic() - self.t0:6.1f}s] {' ' * indent}{text}")

    def more(self, text: str) -> None:
        typer.echo(f"          {text}")


def _flat(text: str | None, limit: int = 100) -> str:
    """One terminal-safe line of text that may come from a model."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in (text or "")).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _seconds(entry: TimelineEntry) -> float | None:
    if entry.started_at is None or entry.ended_at is None:
        return None
    return (entry.ended_at - entry.started_at).total_seconds()


# -- the scenario ----------------------------------------------------------------------------------


async def _wait_http(url: str, what: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    last = "no answer"
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        while time.monotonic() < deadline:
            try:
                resp = await http.get(url)
                if resp.status_code == 200:
                    return
                last = f"HTTP {resp.status_code}"
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            await asyncio.sleep(0.1)
    raise DemoFailed(f"the {what} did not come up within {deadline_s:.0f} s ({last})")


class DemoFailed(Exception):
    """The demo could not go on; the message says why."""


async def _create_repo_and_issue(stack: Stack, clock: Clock) -> int:
    assert stack.sim is not None
    base = stack.sim.config.base_url
    source = stack.settings.data_dir / "sample_repo"
    shutil.copytree(_material("sample_repo"), source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=120) as http:
        body = {"owner": OWNER, "name": NAME, "source_dir": str(source), "ci_command": TEST_COMMAND}
        resp = await http.post("/_sim/repos", json=body)
        if resp.status_code != 201:
            raise DemoFailed(f"the simulator did not create {REPO}: HTTP {resp.status_code} {resp.text[:200]}")
        clock.say(f"created {REPO} on the simulator: a small Python package whose bulk discount starts one item late")
        clock.more(
            f"(tests/test_cart.py fails on main; CI runs `{TEST_COMMAND}`; .github/shopfloor.yml: "
            "auto_fix always, auto_merge, no human approval)"
        )
        resp = await http.post(
            f"/api/v3/repos/{REPO}/issues",
            json={"title": ISSUE_TITLE, "body": ISSUE_BODY},
            headers={"Authorization": f"token user:{REPORTER}"},
        )
        if resp.status_code != 201:
            raise DemoFailed(f"{REPORTER} could not open the issue: HTTP {resp.status_code} {resp.text[:200]}")
        issue = resp.json()
    clock.say(f'@{REPORTER} opened issue #{issue["number"]}: "{ISSUE_TITLE}"  {issue["html_url"]}')
    clock.more("GitHub (the simulator) sends the `issues` webhook to shopfloor's webhook server, which starts the run")
    return int(issue["number"])


class Follower:
    """Polls the issue run's `progress` and `factory` queries (and its agents' `status`) and prints
    what happened since the last poll, stage by stage."""

    def __init__(self, client: Client, settings: Settings, workflow_id: str, clock: Clock) -> None:
        self.client, self.settings, self.workflow_id, self.clock = client, settings, workflow_id, clock
        self.handle = client.get_workflow_handle(workflow_id)
        self.view: ProgressView | None = None
        self.state = FactoryState()
        self.started = False
        self.entries_seen = 0  # timeline entries announced
        self.entries_ended: set[int] = set()
        self.rounds: dict[str, int] = defaultdict(int)
        self.waiting_for: str | None = None
        self.pr_url: str | None = None
        self.agent_seen: dict[str, int] = {}  # child id -> last step event printed
        self.agent_done: set[str] = set()

    async def poll(self) -> bool:
        """One look; True once the run reached a final state."""
        try:
            # temporalio annotates result_type as `type`; its data converter takes any type hint.
            view = await self.handle.query("progress", result_type=ProgressView | None)  # type: ignore[arg-type]
            state = await self.handle.query("factory", result_type=FactoryState)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False  # the webhook has not started it yet
            raise
        if not self.started:
            self.started = True
            self.clock.say(f"the issue run started: {self.workflow_id}")
        self.state = state
        if view is None:
            return False
        self.view = view
        children = stage_children(view, state.children)
        for i, entry in enumerate(view.timeline, start=view.timeline_dropped):
            if i >= self.entries_seen:
                self.entries_seen = i + 1
                self._started(entry)
            child = children.get(i - view.timeline_dropped)
            if child is not None and child not in self.agent_done:
                await self._agent(child)
            if entry.stage == "ci" and state.pr_url and state.pr_url != self.pr_url:
                self.pr_url = state.pr_url
                self.clock.say(f"pull request #{state.pr_number} opened from {state.branch}: {state.pr_url}", 2)
            # An entry's outcome is final once the next stage started (or the run ended).
            settled = i + 1 < view.timeline_dropped + len(view.timeline) or view.final
            if entry.ended_at is not None and settled and i not in self.entries_ended:
                self.entries_ended.add(i)
                self._ended(entry)
        self._waiting(view)
        return view.final

    def _started(self, entry: TimelineEntry) -> None:
        self.rounds[entry.stage] += 1
        if entry.stage != "done":
            again = f" (round {self.rounds[entry.stage]})" if self.rounds[entry.stage] > 1 else ""
            self.clock.say(f"{entry.stage}{again}: {STAGE_TEXT.get(entry.stage, '')}")

    def _ended(self, entry: TimelineEntry) -> None:
        if entry.stage == "done":
            return
        took = _seconds(entry)
        bits = [f"{took:.1f}s" if took is not None else "", f"{entry.steps} steps" if entry.steps else ""]
        outcome = f": {_flat(entry.outcome)}" if entry.outcome else ""
        self.clock.say(f"{entry.stage} done ({', '.join(b for b in bits if b)}){outcome}", 2)

    def _waiting(self, view: ProgressView) -> None:
        waiting = view.waiting_for if view.state == "waiting" else None
        if waiting != self.waiting_for:
            self.waiting_for = waiting
            if waiting:
                text = WAITING_FOR.get(waiting, waiting).format(subject=view.subject.replace("_", " "))
                self.clock.say(f"waiting for {text.replace('`', '')}", 2)

    async def _agent(self, child: str) -> None:
        try:
            status = await self.client.get_workflow_handle(child).query("status", result_type=AgentStatus)
        except RPCError:
            return  # not picked up by the worker yet
        if child not in self.agent_seen:
            self.agent_seen[child] = 0
            self.clock.say(f"agent {child.rsplit('/', 1)[1]} on {_model_label(status.model)}", 2)
        for event in status.events:
            if event.seq > self.agent_seen[child] and event.kind == "tool":
                mark = "" if event.ok else " (failed)"
                self.clock.say(f"step {event.step}: {_call_text(event.summary)}{mark}", 4)
            self.agent_seen[child] = max(self.agent_seen[child], event.seq)
        if status.state != "running":
            self.agent_done.add(child)
            if status.state != "completed":
                self.clock.say(f"agent {child.rsplit('/', 1)[1]} ended {status.state}: {_flat(status.reason)}", 4)


def stage_children(view: ProgressView, children: list[str]) -> dict[int, str]:
    """Which agent run (child workflow id) each timeline entry ran, by position in view.timeline:
    the n-th fix entry ran the n-th fix child (fix-n), and so on."""
    queue: dict[str, list[str]] = defaultdict(list)
    for child in children:
        queue[_kind(child)].append(child)
    found: dict[int, str] = {}
    for i, entry in enumerate(view.timeline):
        if queue.get(entry.stage):
            found[i] = queue[entry.stage].pop(0)
    return found


_ARG = re.compile(r'"(\w+)": ("(?:[^"\\]|\\.)*")')


def _call_text(summary: str) -> str:
    """A tool call's summary, shorter: `run_command {"command": "make"}` -> `run_command make`,
    `edit_file {"new": "b", "old": "a", ...}` -> `edit_file "a" -> "b"`. Summaries are clipped, so
    only arguments that made it in whole are used; anything else is shown as it is."""
    name, _, rest = summary.partition(" ")
    if rest.startswith("{"):
        found = dict(_ARG.findall(rest))
        if name == "edit_file" and "old" in found and "new" in found:
            old, new = (found[k][1:-1].replace("\\n", " ").strip() for k in ("old", "new"))
            return _flat(f'{name} "{old}" -> "{new}"', 110)
        for key in ("path", "command"):
            if key in found and name != "edit_file":
                return _flat(f"{name} {found[key][1:-1]}", 110)
    return _flat(summary, 110)


def _model_label(model: str) -> str:
    if model.startswith("scripted:"):
        return f"the scripted demo model ({Path(model.removeprefix('scripted:')).name})"
    return model


async def _follow(follower: Follower, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await follower.poll():
        if time.monotonic() > deadline:
            where = follower.view.stage if follower.view else "before the run started"
            raise DemoFailed(f"no final state after {timeout_s:.0f} s (at {where}); raise --timeout for slow models")
        await asyncio.sleep(POLL_S)


# -- the report ------------------------------------------------------------------------------------


async def _agent_tokens(client: Client, children: list[str]) -> dict[str, int]:
    """child id -> tokens it used, from each agent run's status (the timeline has no tokens)."""
    tokens: dict[str, int] = {}
    for child in children:
        try:
            st = await client.get_workflow_handle(child).query("status", result_type=AgentStatus)
        except RPCError:
            continue
        tokens[child] = st.usage.input_tokens + st.usage.output_tokens
    return tokens


def _kind(child: str) -> str:
    return re.sub(r"-\d+$", "", child.rsplit("/", 1)[1])


def timeline_rows(view: ProgressView, children: list[str], tokens_of: dict[str, int]) -> list[str]:
    """The timeline as table rows: each stage with its duration, steps, tokens and cost."""
    ran = stage_children(view, children)
    rows = [f"  {'stage':<8} {'duration':>9} {'steps':>6} {'tokens':>8} {'cost':>8}  agent run"]
    first: datetime | None = None
    last: datetime | None = None
    for i, entry in enumerate(view.timeline):
        if entry.stage == "done":
            continue
        first = first or entry.started_at
        last = entry.ended_at or last
        took = _seconds(entry)
        child = ran.get(i)
        tokens = tokens_of.get(child, 0) if child else 0
        rows.append(
            f"  {entry.stage:<8} {(f'{took:.1f}s' if took is not None else 'running'):>9} {entry.steps:>6} "
            f"{tokens:>8,} {f'${entry.cost_usd:.2f}':>8}  {child.rsplit('/', 1)[1] if child else '-'}"
        )
    total = (last - first).total_seconds() if first and last else 0.0
    staged = sum(took for e in view.timeline if e.stage != "done" and (took := _seconds(e)) is not None)
    between = total - staged
    if between >= 0.05:  # pushing, opening the pull request, waking up between stages: no stage's own
        rows.append(f"  {'between':<8} {f'{between:.1f}s':>9} {'':>6} {'':>8} {'':>8}  (between the stages)")
    rows.append(f"  {'total':<8} {f'{total:.1f}s':>9} {view.step:>6} {view.tokens:>8,} {f'${view.cost_usd:.2f}':>8}")
    return rows


async def _report(client: Client, settings: Settings, follower: Follower, scripted: bool) -> bool:
    """Print the timeline, the links and the outcome; True when the fix was merged."""
    view, state = follower.view, follower.state
    assert view is not None
    tokens_of = await _agent_tokens(client, state.children)
    typer.echo("")
    typer.echo(
        f"Timeline of {follower.workflow_id}"
        + (
            " (scripted model: no real model was called; its tokens are the script's own counts, and cost $0)"
            if scripted
            else ""
        )
    )
    for row in timeline_rows(view, state.children, tokens_of):
        typer.echo(row)
    typer.echo("")
    typer.echo("Workflows in the Temporal UI")
    ids = [follower.workflow_id, *state.children]
    width = max(len(i) for i in ids)
    for workflow_id in ids:
        typer.echo(f"  {workflow_id:<{width}}  {settings.workflow_url(workflow_id)}")
    typer.echo("")
    if view.state == "merged":
        sha = f" as {state.merged_sha[:7]}" if state.merged_sha else ""
        typer.echo(
            f"merged: pull request #{state.pr_number} {state.pr_url} was squash-merged{sha}; "
            f"issue #{view.number} is closed"
        )
        return True
    reason = _flat(view.reason or state.reason, 300) or "no reason given"
    if view.state == "parked":
        waiting = WAITING_FOR.get(view.waiting_for or "", view.waiting_for or "a human").format(subject="issue")
        typer.echo(
            f"not merged: the run is parked at {view.stage}, waiting for {waiting.replace('`', '')}; why: {reason}"
        )
    else:
        typer.echo(f"not merged: the run ended {view.state} at {view.stage}; why: {reason}")
    return False


# -- the command -----------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    @app.command()
    @command
    async def demo(
        keep: bool = typer.Option(False, "--keep", help="Leave everything running for inspection; Ctrl-C stops it."),
        model: str | None = typer.Option(
            None, "--model", help="Run every agent on this model (P:M) instead of the demo's scripted one."
        ),
        timeout: float = typer.Option(600.0, "--timeout", min=10, help="Seconds the run may take."),
    ) -> None:
        """Take a sample bug report from issue to merged fix on this machine: embedded Temporal,
        the GitHub simulator, and a scripted model unless SHOPFLOOR_MODEL (or --model) names a real one."""
        base = load_settings()
        if "SHOPFLOOR_LOG_LEVEL" not in os.environ:  # the demo's own lines, not every INFO log
            configure_logging(level="WARNING", json=base.log_json, secrets=base.secret_values())
        chosen = _choose_model(model, base)
        data_dir = Path(tempfile.mkdtemp(prefix="shopfloor-demo-"))
        settings = _demo_settings(base, data_dir, chosen)
        clock = Clock()
        typer.echo("shopfloor demo: a bug report goes from issue to merged fix, on this machine")
        if chosen is None:
            typer.echo(
                "  model  the scripted demo model: it replays shopfloor/demo/cassettes/{triage,fix,review}.json "
                "and calls no LLM (set SHOPFLOOR_MODEL=openai:<model> or anthropic:<model> for a real one)"
            )
        else:
            typer.echo(f"  model  {chosen} for every agent (a real model: this run calls it and may cost money)")
        outcome = "failed"  # merged | failed | interrupted
        try:
            clock.say("starting the embedded stack: Temporal dev server, worker, webhook server, GitHub simulator")
            async with running_stack(settings) as stack:
                outcome = await _run(stack, clock, timeout, keep, scripted=chosen is None)
        except DemoFailed as exc:
            typer.echo(f"shopfloor demo: {exc}", err=True)
        except (KeyboardInterrupt, asyncio.CancelledError):
            outcome = "interrupted"
            raise
        finally:
            if outcome == "failed":
                typer.echo(f"the demo's data (Temporal log, simulator repositories) is kept in {data_dir}", err=True)
            else:
                shutil.rmtree(data_dir, ignore_errors=True)
        if outcome == "interrupted":
            typer.echo("shopfloor demo interrupted: everything is stopped")
            raise typer.Exit(EXIT_INTERRUPTED)
        typer.echo(f"shopfloor demo finished in {time.monotonic() - clock.t0:.1f} s; everything it started is stopped")
        if not keep:
            typer.echo(
                "(its links stop working with it: `shopfloor demo --keep` leaves everything running to open them)"
            )
        if outcome != "merged":
            raise typer.Exit(EXIT_FAILURE)


async def _run(stack: Stack, clock: Clock, timeout_s: float, keep: bool, *, scripted: bool) -> str:
    """The scenario beside the stack's jobs: "merged", "failed" or "interrupted" (by a signal)."""
    scenario = asyncio.create_task(_scenario(stack, clock, timeout_s, scripted))
    stop = asyncio.create_task(stack.stop.wait())
    try:
        await asyncio.wait({scenario, stop, *stack.jobs}, return_when=asyncio.FIRST_COMPLETED)
        if not scenario.done():
            scenario.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await scenario
            if stack.stop.is_set():
                return "interrupted"
            crashed = next(job for job in stack.jobs if job.done())
            error = None if crashed.cancelled() else crashed.exception()
            raise DemoFailed(f"part of the stack stopped while the demo ran: {error!r}")
        try:
            merged, number = scenario.result()
        except DemoFailed as exc:
            typer.echo(f"shopfloor demo: {exc}", err=True)
            merged, number = False, None
        if keep:
            _inspect_hints(stack, number)
            await asyncio.wait({stop, *stack.jobs}, return_when=asyncio.FIRST_COMPLETED)
        return "merged" if merged else "failed"
    finally:
        stop.cancel()


async def _scenario(stack: Stack, clock: Clock, timeout_s: float, scripted: bool) -> tuple[bool, int]:
    s = stack.settings
    assert stack.sim is not None
    await _wait_http(f"{stack.sim.config.base_url}/_sim/deliveries", "GitHub simulator")
    await _wait_http(f"http://127.0.0.1:{s.webhook_port}/readyz", "webhook server")
    clock.say("ready")
    clock.more(f"Temporal UI  {s.ui_url}")
    clock.more(f"GitHub       {stack.sim.config.base_url} (the simulator: GitHub's REST API, git, webhooks, CI)")
    clock.more(f"data         {s.data_dir} (deleted at exit, kept if the demo fails)")
    number = await _create_repo_and_issue(stack, clock)
    follower = Follower(stack.client, s, issue_workflow_id(REPO, number), clock)
    await _follow(follower, timeout_s)
    return await _report(stack.client, s, follower, scripted), number


def _inspect_hints(stack: Stack, number: int | None) -> None:
    s = stack.settings
    assert stack.sim is not None
    base = stack.sim.config.base_url
    # The demo's own UI port too, so the links `shopfloor status` prints open this demo's UI.
    env = (
        f"SHOPFLOOR_TEMPORAL_ADDRESS={s.effective_temporal_address} SHOPFLOOR_TEMPORAL_UI_PORT={s.temporal_ui_port} "
        f"SHOPFLOOR_DATA_DIR={s.data_dir}"
    )
    user = f"-H 'Authorization: token user:{REPORTER}'"
    typer.echo("")
    typer.echo("--keep: everything is still running; Ctrl-C stops it all.")
    typer.echo(f"  Temporal UI   {s.ui_url}/namespaces/{s.temporal_namespace}/workflows")
    typer.echo(f"  the code      git clone {base}/{REPO}.git")
    if number is not None:
        run = issue_workflow_id(REPO, number)
        typer.echo(f"  the issue     curl -s {user} {base}/api/v3/repos/{REPO}/issues/{number}/comments")
        typer.echo(f"  an agent run  {env} shopfloor transcript {run}/fix-1")
        typer.echo(f"  its status    {env} shopfloor status {run}/fix-1")
