"""Simulated CI: a check run named `ci` per PR head sha (and per new tip of the default branch,
for a repository created with `ci_on_default_branch`), run in the background with `run_ci`.

Each run belongs to one head sha, so a slow result for an old sha only ever completes its own
run: a newer push gets a new run and can never be overwritten by an older one.
"""

from __future__ import annotations

import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import structlog

from shopfloor.simulator.store import (
    CI_APP_SLUG,
    CheckRun,
    CheckSuite,
    Issue,
    Repo,
    now,
)

if TYPE_CHECKING:
    from shopfloor.simulator.core import Simulator

log = structlog.get_logger(__name__)
CHECK_NAME = "ci"
TAIL_CHARS = 60_000  # GitHub caps output.text at 65535 characters


class CiRunner:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self._pool: ThreadPoolExecutor | None = None
        self._generation = 0  # bumped by stop(): results of runs from before a reset are dropped

    def start(self) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sim-ci")

    def stop(self) -> None:
        self._generation += 1
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def bot(self) -> Any:
        return self.sim.store.user(f"{CI_APP_SLUG}[bot]", type="Bot")

    def trigger(self, repo: Repo, issue: Issue) -> CheckRun | None:
        """Start CI for the PR's current head (caller holds the store lock)."""
        if issue.pr is None:
            return None
        return self._start(repo, issue.pr.head_sha, issue.pr.head_ref)

    def trigger_commit(self, repo: Repo, sha: str, branch: str) -> CheckRun | None:
        """Start CI for `sha`, pushed to `branch` (caller holds the store lock)."""
        return self._start(repo, sha, branch)

    def _start(self, repo: Repo, sha: str, branch: str) -> CheckRun | None:
        if not repo.ci_command or self._pool is None:
            return None
        store, t = self.sim.store, now()
        suite = next((s for s in repo.check_suites.values() if s.head_sha == sha and s.app_slug == CI_APP_SLUG), None)
        if suite is None:
            suite = CheckSuite(
                id=store.new_id(),
                head_sha=sha,
                head_branch=branch,
                app_slug=CI_APP_SLUG,
                before=None,
                after=sha,
                created_at=t,
                updated_at=t,
            )
            repo.check_suites[suite.id] = suite
            # GitHub asks the App for a suite on a new head (`requested`) before any run exists.
            self.sim.events.send(
                repo,
                "check_suite",
                {"action": "requested", "check_suite": self.sim.checks.suite(repo, suite)},
                self.bot(),
            )
        run = CheckRun(
            id=store.new_id(),
            name=CHECK_NAME,
            head_sha=sha,
            suite=suite,
            status="in_progress",
            conclusion=None,
            started_at=t,
            completed_at=None,
            output={"title": "Running", "summary": f"Running `{repo.ci_command}`", "text": None},
        )
        repo.check_runs[run.id] = run
        self.sim.events.send(
            repo,
            "check_run",
            {"action": "created", "check_run": self.sim.checks.check_run(repo, run, with_suite_detail=True)},
            self.bot(),
        )
        self.sim.busy.add()
        try:
            self._pool.submit(self._run, repo, run, repo.ci_command, self._generation)
        except RuntimeError:  # the pool is shutting down (reset)
            self.sim.busy.done()
        log.info("sim_ci_started", repo=repo.full_name, sha=sha, check_run_id=run.id)
        return run

    def _run(self, repo: Repo, run: CheckRun, command: str, generation: int) -> None:
        from shopfloor.simulator.ci import run_ci

        try:
            try:
                result = run_ci(repo.git, run.head_sha, command, timeout_s=self.sim.config.ci_timeout_s)
                conclusion, output, duration = result.conclusion, result.output, result.duration_s
            except Exception as exc:  # noqa: BLE001 - a broken runner is a failed check, never a stuck one
                log.error("sim_ci_crashed", repo=repo.full_name, sha=run.head_sha, error=traceback.format_exc())
                conclusion, output, duration = "failure", f"CI runner error: {exc}", 0.0
            if generation != self._generation:
                return
            self.complete(repo, run, conclusion, output, duration, command)
        except Exception:  # noqa: BLE001 - never let a CI thread die silently
            log.error("sim_ci_complete_failed", repo=repo.full_name, sha=run.head_sha, error=traceback.format_exc())
        finally:
            self.sim.busy.done()

    def complete(self, repo: Repo, run: CheckRun, conclusion: str, output: str, duration: float, command: str) -> None:
        titles = {"success": "Tests passed", "failure": "Tests failed", "timed_out": "Tests timed out"}
        with self.sim.store.lock:
            if self.sim.store.repo(repo.owner.login, repo.name) is not repo:
                return  # the repo was reset away meanwhile
            run.status, run.conclusion, run.completed_at = "completed", conclusion, now()
            run.output = {
                "title": titles.get(conclusion, conclusion),
                "summary": f"`{command}` finished with {conclusion} in {duration:.1f}s",
                "text": "```\n" + output[-TAIL_CHARS:] + "\n```",
            }
            run.suite.updated_at = now()
            checks, bot = self.sim.checks, self.bot()
            self.sim.events.send(
                repo,
                "check_run",
                {"action": "completed", "check_run": checks.check_run(repo, run, with_suite_detail=True)},
                bot,
            )
            suite_runs = [c for c in repo.check_runs.values() if c.suite.id == run.suite.id]
            if all(c.status == "completed" for c in suite_runs):
                self.sim.events.send(
                    repo, "check_suite", {"action": "completed", "check_suite": checks.suite(repo, run.suite)}, bot
                )
        log.info("sim_ci_completed", repo=repo.full_name, sha=run.head_sha, conclusion=conclusion)
