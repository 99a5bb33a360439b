"""The simulator's composition root: state, shapes, webhooks, CI, and the effects of ref moves.

Routes reach it as `request.app.state.sim`. Anything that moves a branch (a git push, the refs or
contents API, a merge) goes through `refs_moved`, so webhooks and CI behave the same whichever
way the code arrived.
"""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import structlog

from shopfloor.simulator.config import SimulatorConfig
from shopfloor.simulator.errors import GitHubError, invalid
from shopfloor.simulator.events import Events
from shopfloor.simulator.faults import Faults, RateLimits
from shopfloor.simulator.git.repos import BareRepo, GitError, RefUpdate
from shopfloor.simulator.shapes.checks import CheckShapes
from shopfloor.simulator.shapes.common import Shapes
from shopfloor.simulator.shapes.git import GitShapes
from shopfloor.simulator.shapes.pulls import PullShapes
from shopfloor.simulator.store import Hook, Issue, Repo, Store, User, now
from shopfloor.simulator.webhooks import Busy, Dispatcher

log = structlog.get_logger(__name__)
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$|^[A-Za-z0-9-]+\[bot\]$")


class Simulator:
    def __init__(self, config: SimulatorConfig) -> None:
        from shopfloor.simulator.ci_runner import (
            CiRunner,  # ci_runner imports this module's types
        )

        self.config = config
        self.store = Store()
        self.shapes = Shapes(config.base_url, self.store)
        self.git_shapes = GitShapes(self.shapes)
        self.pulls = PullShapes(self.shapes)
        self.checks = CheckShapes(self.shapes, config.app_id)
        self.busy = Busy()
        self.dispatcher = Dispatcher(self.store, self.busy, timeout_s=config.delivery_timeout_s)
        self.events = Events(self)
        self.faults = Faults()
        self.limits = RateLimits(
            config.rate_limit,
            config.search_rate_limit,
            writes_per_minute=config.secondary_writes_per_minute,
            retry_after_s=config.secondary_retry_after_s,
        )
        self.ci = CiRunner(self)

    @property
    def repos_dir(self) -> Path:
        return self.config.data_dir / "repos"

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        # State lives in memory, so repositories left on disk by an earlier run belong to nothing.
        shutil.rmtree(self.repos_dir, ignore_errors=True)
        self.repos_dir.mkdir(parents=True, exist_ok=True)
        self.ci.start()

    def stop(self) -> None:
        self.dispatcher.stop()
        self.ci.stop()

    def wait_idle(self, timeout: float) -> bool:
        return self.busy.wait_idle(timeout)

    def reset(self) -> None:
        """Empty everything: stop deliveries and CI, forget all state, delete repos on disk."""
        self.dispatcher.restart()
        self.ci.stop()
        self.busy.reset()
        self.store.clear()
        self.faults.clear()
        self.limits.clear()
        shutil.rmtree(self.repos_dir, ignore_errors=True)
        self.repos_dir.mkdir(parents=True, exist_ok=True)
        self.ci.start()

    # ---- repositories --------------------------------------------------------------------------
    def create_repo(
        self,
        owner: str,
        name: str,
        *,
        source_dir: Path | None = None,
        default_branch: str = "main",
        ci_command: str | None = None,
        private: bool = False,
        description: str | None = None,
        ci_on_default_branch: bool = False,
    ) -> Repo:
        if not LOGIN_RE.match(owner):
            raise invalid("Repository", "owner")
        if not NAME_RE.match(name) or name in (".", "..") or name.endswith(".git"):
            raise invalid("Repository", "name")
        if source_dir is not None and not Path(source_dir).is_dir():
            raise invalid("Repository", "source_dir", message=f"{source_dir} is not a directory")
        with self.store.lock:
            if self.store.repo(owner, name) is not None:
                raise GitHubError(
                    422,
                    "Repository creation failed.",
                    errors=[
                        {
                            "resource": "Repository",
                            "code": "custom",
                            "field": "name",
                            "message": "name already exists on this account",
                        }
                    ],
                )
            path = self.repos_dir / owner / f"{name}.git"
            try:
                git = BareRepo.create(path, default_branch=default_branch, source_dir=source_dir)
            except GitError as exc:
                shutil.rmtree(path, ignore_errors=True)
                raise invalid("Repository", "default_branch", message=str(exc)) from None
            t = now()
            repo = Repo(
                id=self.store.new_id(),
                owner=self.store.user(owner),
                name=name,
                git=git,
                default_branch=default_branch,
                private=private,
                ci_command=ci_command,
                ci_on_default_branch=ci_on_default_branch,
                created_at=t,
                updated_at=t,
                pushed_at=t,
                description=description,
            )
            self.store.repos[f"{owner}/{name}".lower()] = repo
            self.store.installation_id(owner)
            if self.config.default_hook_url:
                secret = self.config.default_hook_secret
                self.add_hook(
                    repo,
                    url=self.config.default_hook_url,
                    secret=secret.get_secret_value() if secret else None,
                    events=["*"],
                )
        log.info("sim_repo_ready", repo=repo.full_name, ci=bool(ci_command))
        return repo

    def fork_repo(self, source: Repo, owner: str) -> Repo:
        """`owner`'s fork of `source` (its existing one if it has it), as POST /repos/{o}/{r}/forks."""
        with self.store.lock:
            existing = self.store.repo(owner, source.name)
            if existing is not None:
                if existing.parent is source:
                    return existing
                raise GitHubError(
                    422,
                    "Repository creation failed.",
                    errors=[
                        {
                            "resource": "Repository",
                            "code": "custom",
                            "field": "name",
                            "message": "name already exists on this account",
                        }
                    ],
                )
            path = self.repos_dir / owner / f"{source.name}.git"
            try:
                git = source.git.fork_to(path)
            except GitError as exc:
                shutil.rmtree(path, ignore_errors=True)
                raise GitHubError(422, f"Repository creation failed: {exc}") from None
            t = now()
            fork = Repo(
                id=self.store.new_id(),
                owner=self.store.user(owner),
                name=source.name,
                git=git,
                default_branch=source.default_branch,
                private=source.private,
                ci_command=None,
                created_at=t,
                updated_at=t,
                pushed_at=t,
                description=source.description,
                parent=source,
            )
            self.store.repos[f"{owner}/{source.name}".lower()] = fork
        log.info("sim_repo_forked", repo=fork.full_name, parent=source.full_name)
        return fork

    def add_hook(
        self,
        repo: Repo,
        *,
        url: str,
        secret: str | None,
        events: list[str],
        content_type: str = "json",
        active: bool = True,
        insecure_ssl: str = "0",
    ) -> Hook:
        with self.store.lock:
            hook = Hook(
                id=self.store.new_id(),
                repo_id=repo.id,
                url=url,
                secret=secret or None,
                content_type=content_type,
                events=events,
                active=active,
                insecure_ssl=insecure_ssl,
            )
            repo.hooks[hook.id] = hook
            sender = self.store.user(repo.owner.login)
            ping = {
                "zen": "Keep it logically awesome.",
                "hook_id": hook.id,
                "hook": {**self.checks.hook(repo, hook), "app_id": self.config.app_id},
            }
            self.events.send(repo, "ping", ping, sender, only_hook=hook)
        return hook

    # ---- ref moves -------------------------------------------------------------------------------
    def refs_moved(self, repo: Repo, pusher: User, updates: list[RefUpdate]) -> None:
        """A push (by git or by the API): push webhooks, PR synchronize, CI for PR heads (and for
        the default branch's new tip when the repository runs CI on it)."""
        with self.store.lock:
            repo.pushed_at = repo.updated_at = now()
            for update in updates:
                self.events.push(repo, update, pusher)
                self.events.ref_created_or_deleted(repo, update, pusher)
                if not update.ref.startswith("refs/heads/") or update.after == "0" * 40:
                    continue
                branch = update.ref.removeprefix("refs/heads/")
                if branch == repo.default_branch and repo.ci_on_default_branch:
                    self.ci.trigger_commit(repo, update.after, branch)
                delay = self.config.pr_sync_delay_s
                if delay <= 0:
                    self._sync_pull_heads(repo, branch, pusher)
                    continue
                self.busy.add()  # wait_idle covers the sync still to come
                timer = threading.Timer(delay, self._sync_later, args=(repo, branch, pusher))
                timer.daemon = True
                timer.start()

    def _sync_later(self, repo: Repo, branch: str, pusher: User) -> None:
        try:
            with self.store.lock:
                self._sync_pull_heads(repo, branch, pusher)
        except Exception:  # noqa: BLE001 - a background job: logged, never raised into a timer thread
            log.exception("sim_pull_head_sync_failed", repo=repo.full_name, branch=branch)
        finally:
            self.busy.done()

    def _sync_pull_heads(self, repo: Repo, branch: str, pusher: User) -> None:
        """Move the heads of the open pull requests whose head is `branch` (in this repository,
        or in the one it was forked from) to the branch's tip now: `synchronize`, then CI."""
        after = repo.git.ref_sha(branch)
        if after is None:
            return
        for base in (repo, repo.parent) if repo.parent is not None else (repo,):
            head_repo = None if base is repo else repo
            for issue in self.open_prs(base, head=branch, head_repo=head_repo):
                assert issue.pr is not None
                before = issue.pr.head_sha
                if before == after:
                    continue  # an earlier sync already took this push in
                base.git.set_pull_head(issue.number, after, source=repo.git if head_repo else None)
                issue.pr.head_sha = after
                issue.updated_at = now()
                self.events.pull_request(base, issue, "synchronize", pusher, before=before, after=after)
                self.ci.trigger(base, issue)

    def on_git_push(self, owner: str, name: str, pusher_login: str, updates: list[RefUpdate]) -> None:
        repo = self.store.repo(owner, name)
        if repo is None or not updates:
            return
        self.refs_moved(repo, self.store.user(pusher_login), updates)

    @staticmethod
    def open_prs(
        repo: Repo, *, head: str | None = None, base: str | None = None, head_repo: Repo | None = None
    ) -> list[Issue]:
        """Open PRs of `repo`; with `head`, those whose head is that branch of `head_repo` (None:
        of `repo` itself)."""
        return [
            i
            for i in repo.issues.values()
            if i.pr
            and i.state == "open"
            and (head is None or (i.pr.head_ref == head and i.pr.head_repo is head_repo))
            and (base is None or i.pr.base_ref == base)
        ]
