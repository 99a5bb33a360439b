"""Webhook payloads in GitHub's shapes, built at the moment of the event (a snapshot, like GitHub)."""

from __future__ import annotations

from typing import Any

from shopfloor.simulator.git.repos import ZERO_SHA, CommitInfo, RefUpdate
from shopfloor.simulator.shapes.common import node_id
from shopfloor.simulator.shapes.git import git_date
from shopfloor.simulator.store import Issue, Repo, Review, User

MAX_PUSH_COMMITS = 20  # GitHub lists at most 20 commits in a push payload


class Events:
    def __init__(self, sim: Any) -> None:
        self.sim = sim

    def installation(self, repo: Repo) -> dict[str, Any]:
        inst = self.sim.store.installation_id(repo.owner.login)
        return {"id": inst, "node_id": node_id("Installation", inst)}

    def send(self, repo: Repo, event: str, payload: dict[str, Any], sender: User, **kw: Any) -> str:
        """Add the common keys and queue the event for the repo's hooks."""
        s = self.sim.shapes
        body = {**payload}
        body.setdefault("repository", s.repo(repo))
        body["sender"] = s.user(sender)
        if repo.parent is None:  # the App is not installed on people's forks
            body["installation"] = self.installation(repo)
        return self.sim.dispatcher.emit(repo, event, body, **kw)

    def issue(self, repo: Repo, issue: Issue, action: str, sender: User, **extra: Any) -> None:
        if issue.pr is not None:
            self.pull_request(repo, issue, action, sender, **extra)
            return
        self.send(repo, "issues", {"action": action, "issue": self.sim.shapes.issue(repo, issue), **extra}, sender)

    def pull_request(self, repo: Repo, issue: Issue, action: str, sender: User, **extra: Any) -> None:
        pr = self.sim.pulls.full(repo, issue)
        self.send(repo, "pull_request", {"action": action, "number": issue.number, "pull_request": pr, **extra}, sender)

    def comment(self, repo: Repo, issue: Issue, comment: Any, action: str, sender: User, **extra: Any) -> None:
        s = self.sim.shapes
        self.send(
            repo,
            "issue_comment",
            {"action": action, "issue": s.issue(repo, issue), "comment": s.comment(repo, comment), **extra},
            sender,
        )

    def review(self, repo: Repo, issue: Issue, review: Review, sender: User) -> None:
        shaped = self.sim.pulls.review(repo, issue, review)
        shaped["state"] = review.state.lower()  # webhooks use lower case here
        self.send(
            repo,
            "pull_request_review",
            {"action": "submitted", "review": shaped, "pull_request": self.sim.pulls.simple(repo, issue)},
            sender,
        )

    def review_comment(self, repo: Repo, issue: Issue, review: Review, comment: dict[str, Any], sender: User) -> None:
        """One `pull_request_review_comment.created` per line comment, after its review's event (as GitHub)."""
        self.send(
            repo,
            "pull_request_review_comment",
            {
                "action": "created",
                "comment": self.sim.pulls.review_comment(repo, issue, review, comment),
                "pull_request": self.sim.pulls.simple(repo, issue),
            },
            sender,
        )

    # ---- push --------------------------------------------------------------------------------
    def _commit_item(self, repo: Repo, c: CommitInfo) -> dict[str, Any]:
        git = repo.git
        parent = c.parents[0] if c.parents else None
        added: list[str] = []
        removed: list[str] = []
        modified: list[str] = []
        if parent:
            for f in git.changed_files(parent, c.sha):
                {"added": added, "removed": removed}.get(f.status, modified).append(f.filename)
        return {
            "id": c.sha,
            "tree_id": c.tree_sha,
            "distinct": True,
            "message": c.message,
            "timestamp": git_date(c.committer_date),
            "url": f"{self.sim.config.base_url}/{repo.full_name}/commit/{c.sha}",
            "author": {"name": c.author_name, "email": c.author_email},
            "committer": {"name": c.committer_name, "email": c.committer_email},
            "added": added,
            "removed": removed,
            "modified": modified,
        }

    def ref_created_or_deleted(self, repo: Repo, update: RefUpdate, sender: User) -> None:
        """`create` or `delete` beside the push, for a new or removed branch or tag."""
        kind = (
            "branch" if update.ref.startswith("refs/heads/") else "tag" if update.ref.startswith("refs/tags/") else None
        )
        if kind is None or ZERO_SHA not in (update.before, update.after):
            return
        name = update.ref.removeprefix("refs/heads/").removeprefix("refs/tags/")
        payload: dict[str, Any] = {"ref": name, "ref_type": kind, "pusher_type": "user"}
        if update.before == ZERO_SHA:
            payload |= {"master_branch": repo.default_branch, "description": repo.description}
            self.send(repo, "create", payload, sender)
        else:
            self.send(repo, "delete", payload, sender)

    def push(self, repo: Repo, update: RefUpdate, pusher: User) -> None:
        git = repo.git
        created, deleted = update.before == ZERO_SHA, update.after == ZERO_SHA
        forced = not created and not deleted and not git.is_ancestor(update.before, update.after)
        commits: list[CommitInfo] = []
        if not deleted:
            if created:
                default_tip = git.branches().get(repo.default_branch)
                base = git.merge_base(default_tip, update.after) if default_tip else None
                commits = git.commits_between(base, update.after) if base and base != update.after else []
            else:
                base = git.merge_base(update.before, update.after) or update.before
                commits = git.commits_between(base, update.after)
        items = [self._commit_item(repo, c) for c in commits[-MAX_PUSH_COMMITS:]]
        head = None if deleted else self._commit_item(repo, git.commit(update.after))
        email = f"{pusher.login}@users.noreply.simulator"
        payload = {
            "ref": update.ref,
            "before": update.before,
            "after": update.after,
            "created": created,
            "deleted": deleted,
            "forced": forced,
            "base_ref": None,
            "compare": f"{self.sim.config.base_url}/{repo.full_name}/compare/{update.before[:12]}...{update.after[:12]}",
            "commits": items,
            "head_commit": head,
            "repository": self.sim.shapes.repo(repo, push_style=True),
            "pusher": {"name": pusher.login, "email": email},
        }
        self.send(repo, "push", payload, pusher)
