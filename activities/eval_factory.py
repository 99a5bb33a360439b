"""`shopfloor eval run --agents factory`: a task through the whole factory on the GitHub simulator.

- `eval_publish`: the task's base tree becomes a new simulator repository (CI runs the task's test
  command) whose `.github/shopfloor.yml` has every agent use the model under evaluation, fix
  whatever is filed, and wait for a person's approval before merging; its issue is opened by the
  repository's owner and its IssueWorkflow started as shopfloor's own starters do.
- `eval_factory_wait`: follows that run (describe, which needs no worker) until it waits for the
  merge approval or ends, then reads where it stands with one `factory` query.
- `eval_factory_stop`: ends the run as `shopfloor cancel` does once the eval has its change.

Only the simulator: an eval never creates repositories or opens issues on a real GitHub. The
tree is handed over as a directory, so the simulator must share the worker's machine, as
`shopfloor dev` runs it. The hidden tests are never in the tree: they stay with the check.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import math
import re
import shutil
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import structlog
import yaml
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from shopfloor.activities.git_cmd import GitError, WorkspaceError
from shopfloor.activities.heartbeat import heartbeating
from shopfloor.activities.reconcile import TITLE_CHARS, snapshot
from shopfloor.activities.workspace import Workspaces
from shopfloor.agents.policy import POLICY_PATH, parse_policy, within_operator_bounds
from shopfloor.agents.untrusted_text import sanitize
from shopfloor.blobs import BlobStore, get_json
from shopfloor.errors import ShopfloorError
from shopfloor.models import failure_types
from shopfloor.models.eval_run import FactoryEnd, FactoryStopInput, FactoryWaitInput, PublishedTask, PublishInput
from shopfloor.models.eval_task import EvalTask
from shopfloor.models.factory_run import FactoryState
from shopfloor.models.inbox import RepoEvent, issue_workflow_id
from shopfloor.models.inbox_state import IssueOutcome
from shopfloor.search_attributes import SHOPFLOOR_STAGE
from shopfloor.settings import Settings
from shopfloor.temporal import start_issue_workflow

log = structlog.get_logger(__name__)

OWNER = "shopfloor-eval"  # the simulator account that owns every eval repository and files its issue
# The stages where a factory run has nothing more to do for an eval: waiting for the merge
# approval (the policy requires one), or ended.
AT_THE_GATE = ("merge", "parked", "done", "closed", "stopped", "idle")
POLL_S = 2.0
QUERY_TIMEOUT_S = 30.0


def _not_retryable(message: str) -> ApplicationError:
    return ApplicationError(message, type=failure_types.WORKSPACE_ERROR, non_retryable=True)


def repo_name(eval_run: str, instance_id: str, model: str) -> str:
    """The simulator repository of one (task, model) pair: readable, unique, within GitHub's 100."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{eval_run}--{instance_id}--{model}").strip("-.")
    digest = hashlib.sha256(f"{eval_run}\0{instance_id}\0{model}".encode()).hexdigest()[:8]
    return f"{slug[:90]}-{digest}"


def eval_policy(inp: PublishInput, test_command: str, existing: str | None) -> str:
    """The repository's `.github/shopfloor.yml`: the task's own, if it has one, with what the eval
    needs set over it (the model, fixing without a label, a person's approval before merging)."""
    policy: dict[str, Any] = {}
    if existing is not None:
        try:
            loaded = yaml.safe_load(existing)
        except yaml.YAMLError:
            loaded = None  # a broken file of the task's own: the eval's policy replaces it
        policy = loaded if isinstance(loaded, dict) else {}
    steps = min(inp.max_steps, 200)  # the policy's own bound for triage and review
    given = policy.get("budgets")
    budgets: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    budgets["max_steps"] = {"triage": steps, "fix": inp.max_steps, "review": steps}
    budgets["max_cost_usd_per_run"] = inp.max_cost_usd  # None: no cost limit, as for the fix agent alone
    budgets.pop("max_cost_usd", None)
    policy.update(
        auto_fix="always",
        fixability_threshold=0.0,  # the eval measures fixes: the triage's doubt must not skip one
        require_human_approval=True,  # nobody approves: the run waits at the merge, where the eval takes its change
        auto_merge=False,
        test_command=test_command,
        models={"triage": inp.model, "fix": inp.model, "review": inp.model},
        budgets=budgets,
        approval_timeout_minutes=max(1, math.ceil(inp.approval_timeout_s / 60)),
    )
    return yaml.safe_dump(policy, sort_keys=False)


class EvalFactoryActivities:
    def __init__(self, client: Client, settings: Settings, blobs: BlobStore, workspaces: Workspaces) -> None:
        self._client = client
        self._settings = settings
        self._blobs = blobs
        self._workspaces = workspaces
        self._api = settings.github_api_url.rstrip("/")
        # The simulator serves GitHub's API under /api/v3, as GitHub Enterprise does, and its own
        # control endpoints (`/_sim/...`) at the root.
        self._root = self._api.removesuffix("/api/v3")

    def all(self) -> list[Any]:
        return [self.eval_publish, self.eval_factory_wait, self.eval_factory_stop]

    # -- publish ---------------------------------------------------------------------------------

    @activity.defn(name="eval_publish")
    async def eval_publish(self, inp: PublishInput) -> PublishedTask:
        try:
            task = EvalTask.model_validate(await get_json(self._blobs, inp.task_digest))
        except (ShopfloorError, ValueError) as exc:
            raise _not_retryable(
                f"eval task {inp.task_digest[:12]} cannot be read from the blob store: {exc}"
            ) from None
        self._check_model(inp.model)
        name = repo_name(inp.eval_run, task.instance_id, inp.model)
        tree = self._workspaces.root / "eval-trees" / name
        async with httpx.AsyncClient(base_url=self._api, timeout=30.0) as http:
            repo = await self._repo(http, name)
            if repo is None:
                await heartbeating(self._export(task, tree, inp), detail=f"{task.instance_id}'s tree")
                repo = await self._create_repo(http, name, tree, task.test_command)
            shutil.rmtree(tree, ignore_errors=True)
            full = f"{OWNER}/{name}"
            number = await self._issue(http, full, task)
            base_sha = await self._default_head(http, full, str(repo["default_branch"]))
            workflow_id = await self._start(http, full, number, f"eval:{inp.eval_run}:{name}")
        return PublishedTask(
            repo=full, number=number, clone_url=str(repo["clone_url"]), base_sha=base_sha, workflow_id=workflow_id
        )

    def _check_model(self, model: str) -> None:
        """The factory takes the model from the repository's policy, which only names models the
        operator lets repositories choose: anything else would run the default model instead."""
        load = within_operator_bounds(parse_policy(f"models:\n  fix: {model!r}\n"), self._settings.repo_models)
        if load.errors:
            raise _not_retryable(
                f"--agents factory gives the factory {model} through the repository's policy, and this worker "
                f"does not let repositories choose it: add it to SHOPFLOOR_REPO_MODELS ({'; '.join(load.errors)})"
            )

    async def _export(self, task: EvalTask, dest: Path, inp: PublishInput) -> None:
        """The task's tree at its base commit, with the eval's policy, in `dest`."""
        try:
            repo = task.repo if "/" in task.repo else f"local/{task.repo}"
            base = await self._workspaces.base_ref(repo, task.repo_path or "", task.base_commit)
            mirror = await self._workspaces.mirrors.open(base.clone_url or "")
            _, archive, _ = await mirror.run("archive", "--format=tar", task.base_commit)
        except GitError as exc:
            raise ApplicationError(str(exc), type=failure_types.GIT_ERROR) from None
        except WorkspaceError as exc:
            raise _not_retryable(f"{task.instance_id}: {exc}") from None

        def write() -> None:
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(dest, filter="data")
            policy = dest / POLICY_PATH
            existing = policy.read_text(errors="replace") if policy.is_file() else None
            policy.parent.mkdir(parents=True, exist_ok=True)
            text = eval_policy(inp, task.test_command, existing)
            if errors := parse_policy(text).errors:  # the task's own settings, mixed in, can be wrong
                raise _not_retryable(f"{task.instance_id}: the eval's {POLICY_PATH} is not valid: {'; '.join(errors)}")
            policy.write_text(text)

        await asyncio.to_thread(write)

    async def _repo(self, http: httpx.AsyncClient, name: str) -> dict[str, Any] | None:
        """The repository, when an earlier attempt created it; None when it does not exist."""
        resp = await self._send(http, "GET", f"/repos/{OWNER}/{name}")
        return None if resp.status_code == 404 else dict(resp.json())

    async def _create_repo(self, http: httpx.AsyncClient, name: str, tree: Path, ci_command: str) -> dict[str, Any]:
        body = {"owner": OWNER, "name": name, "source_dir": str(tree.resolve()), "ci_command": ci_command}
        try:  # the simulator's control route, beside its API: an absolute URL on the same client
            resp = await http.post(f"{self._root}/_sim/repos", json=body, timeout=60.0)
        except httpx.HTTPError as exc:
            raise ApplicationError(
                f"the GitHub simulator at {self._root} did not answer: {exc}", type=failure_types.GITHUB_UNAVAILABLE
            ) from None
        if resp.status_code >= 500:
            raise ApplicationError(
                f"the GitHub simulator failed to create {name}: {resp.status_code} {resp.text[:300]}"
            )
        if resp.status_code not in (201, 422):
            raise _not_retryable(
                f"--agents factory runs on the GitHub simulator only, and this worker's GitHub ({self._api}) is not "
                "one: run the eval under `shopfloor dev`, or point SHOPFLOOR_GITHUB_API_URL at a simulator"
            )
        if resp.status_code == 422:  # created by an attempt whose answer was lost, or the tree is unreadable
            again = await self._repo(http, name)
            if again is None:
                raise _not_retryable(
                    f"the simulator refused the task's repository: {resp.text[:300]} (it must share the worker's disk)"
                )
            return again
        return dict(resp.json())

    async def _issue(self, http: httpx.AsyncClient, repo: str, task: EvalTask) -> int:
        """The task's issue: the one an earlier attempt opened, or a new one by the owner."""
        listed = await self._send(
            http, "GET", f"/repos/{repo}/issues", ok=(200,), params={"state": "all", "per_page": 100}
        )
        for issue in listed.json():
            if "pull_request" not in issue and issue.get("user", {}).get("login") == OWNER:
                return int(issue["number"])
        first = next((line.strip() for line in task.problem_statement.splitlines() if line.strip()), task.instance_id)
        body = {"title": first[:200], "body": task.problem_statement}
        created = await self._send(http, "POST", f"/repos/{repo}/issues", ok=(201,), json=body)
        return int(created.json()["number"])

    async def _send(
        self, http: httpx.AsyncClient, method: str, path: str, ok: tuple[int, ...] = (200, 201, 404), **kw: Any
    ) -> httpx.Response:
        headers = {"Authorization": f"token user:{OWNER}", **kw.pop("headers", {})}
        try:
            resp = await http.request(method, path, headers=headers, **kw)
        except httpx.HTTPError as exc:
            raise ApplicationError(
                f"the GitHub simulator at {self._api} did not answer {method} {path}: {exc}",
                type=failure_types.GITHUB_UNAVAILABLE,
            ) from None
        if resp.status_code not in ok:
            raise ApplicationError(
                f"the GitHub simulator answered {method} {path} with {resp.status_code}: {resp.text[:300]}",
                type=failure_types.GITHUB_SERVER_ERROR
                if resp.status_code >= 500
                else failure_types.GITHUB_REQUEST_FAILED,
                non_retryable=resp.status_code < 500,
            )
        return resp

    async def _default_head(self, http: httpx.AsyncClient, repo: str, branch: str) -> str:
        resp = await self._send(http, "GET", f"/repos/{repo}/branches/{branch}", ok=(200,))
        return str(resp.json()["commit"]["sha"])

    async def _start(self, http: httpx.AsyncClient, repo: str, number: int, delivery_id: str) -> str:
        """Signal-with-start the issue's IssueWorkflow as `shopfloor run issue` does (an edge that
        saw the issue open may have started it: then this only signals it)."""
        issue = (await self._send(http, "GET", f"/repos/{repo}/issues/{number}", ok=(200,))).json()
        title, body = str(issue.get("title") or ""), str(issue.get("body") or "")
        event = RepoEvent(
            delivery_id=delivery_id,
            event="issues",
            action="opened",
            repo=repo,
            number=number,
            sender=OWNER,
            sender_type="User",
            title=sanitize(title)[:TITLE_CHARS],
            text=await snapshot(self._blobs, title, body),
            state="open",
            received_at=datetime.now(UTC),
            internal=True,
        )
        try:
            await start_issue_workflow(
                self._client, self._settings.task_queue, event, new_run=False, started_by="`shopfloor eval run`"
            )
        except WorkflowAlreadyStartedError:
            pass  # this task's run ran already: the wait reads where it ended
        except RPCError as exc:
            raise ApplicationError(
                f"Temporal refused to start {issue_workflow_id(repo, number)}: {exc.message}"
            ) from None
        return issue_workflow_id(repo, number)

    # -- wait and stop ---------------------------------------------------------------------------

    @activity.defn(name="eval_factory_wait")
    async def eval_factory_wait(self, inp: FactoryWaitInput) -> FactoryEnd:
        return await heartbeating(self._wait(inp), detail=f"following {inp.workflow_id}")

    async def _wait(self, inp: FactoryWaitInput) -> FactoryEnd:
        handle = self._client.get_workflow_handle(inp.workflow_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + inp.timeout_s
        stage = ""
        while True:
            try:
                described = await handle.describe()
            except RPCError as exc:
                if exc.status == RPCStatusCode.NOT_FOUND:
                    raise _not_retryable(f"{inp.workflow_id} does not exist") from None
                raise ApplicationError(f"Temporal did not describe {inp.workflow_id}: {exc.message}") from None
            stage = described.typed_search_attributes.get(SHOPFLOOR_STAGE) or ""
            if described.status != WorkflowExecutionStatus.RUNNING:
                return await self._ended(inp.workflow_id, stage)
            if stage in AT_THE_GATE:
                state = await self._query(inp.workflow_id)
                if state is not None and (state.result or state.stage == "merge"):
                    return _end(state, stage)
            if loop.time() > deadline:
                raise _not_retryable(
                    f"the factory did not reach its merge stage within {inp.timeout_s:g} s (stage: {stage or 'none'})"
                )
            await asyncio.sleep(POLL_S)

    async def _query(self, workflow_id: str) -> FactoryState | None:
        try:
            return await self._client.get_workflow_handle(workflow_id).query(
                "factory", result_type=FactoryState, rpc_timeout=timedelta(seconds=QUERY_TIMEOUT_S)
            )
        except RPCError as exc:  # no worker free to answer just now: the next poll asks again
            log.info("factory query failed", workflow_id=workflow_id, error=exc.message[:200])
            return None

    async def _ended(self, workflow_id: str, stage: str) -> FactoryEnd:
        try:
            handle = self._client.get_workflow_handle(workflow_id, result_type=IssueOutcome)
            outcome = await asyncio.wait_for(handle.result(), QUERY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a failed or terminated run: say so, in its words
            raise _not_retryable(f"{workflow_id} ended without an outcome: {str(exc)[:300]}") from None
        if outcome.factory is None:
            return FactoryEnd(stage=stage or "done", result="failed", reason=f"{workflow_id} ran no pipeline")
        return _end(outcome.factory, stage)

    @activity.defn(name="eval_factory_stop")
    async def eval_factory_stop(self, inp: FactoryStopInput) -> bool:
        """Whether the run was still running and was told to stop."""
        handle = self._client.get_workflow_handle(inp.workflow_id)
        try:
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                return False
            await handle.signal("cancel", inp.reason)
            return True
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise ApplicationError(f"Temporal did not take the cancel of {inp.workflow_id}: {exc.message}") from None


def _end(state: FactoryState, stage: str) -> FactoryEnd:
    return FactoryEnd(
        stage=state.stage or stage,
        result=state.result,
        reason=state.reason[:300],
        pr_number=state.pr_number,
        head_sha=state.head_sha,
        steps=state.steps,
        tokens=state.tokens,
        cost_usd=state.cost_usd,
        children=state.children[-20:],
    )
