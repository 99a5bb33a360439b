"""GitHub-shaped JSON for commit statuses, checks, hooks, deliveries and the GitHub App."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shopfloor.simulator.shapes.common import Shapes, iso, node_id
from shopfloor.simulator.shapes.git import git_date
from shopfloor.simulator.store import (
    CI_APP_SLUG,
    CheckRun,
    CheckSuite,
    CommitStatus,
    Delivery,
    Hook,
    Repo,
    User,
)

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
APP_PERMISSIONS = {
    "checks": "write",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
    "statuses": "write",
}
APP_EVENTS = [
    "check_run",
    "check_suite",
    "issue_comment",
    "issues",
    "pull_request",
    "pull_request_review",
    "push",
    "status",
]


class CheckShapes:
    def __init__(self, shapes: Shapes, app_id: int) -> None:
        self.shapes = shapes
        self.app_id = app_id

    def status(self, r: Repo, st: CommitStatus) -> dict[str, Any]:
        return {
            "url": f"{self.shapes.api}/repos/{r.full_name}/statuses/{st.sha}",
            "avatar_url": None,
            "id": st.id,
            "node_id": node_id("StatusContext", st.id),
            "state": st.state,
            "description": st.description,
            "target_url": st.target_url,
            "context": st.context,
            "created_at": iso(st.created_at),
            "updated_at": iso(st.updated_at),
            "creator": self.shapes.user(st.creator),
        }

    def combined(self, r: Repo, sha: str) -> dict[str, Any]:
        latest: dict[str, CommitStatus] = {}
        for st in r.statuses:  # appended in time order: the last per context wins
            if st.sha == sha:
                latest[st.context] = st
        states = [st.state for st in latest.values()]
        if any(s in ("failure", "error") for s in states):
            state = "failure"
        elif not states or any(s == "pending" for s in states):
            state = "pending"
        else:
            state = "success"
        api = f"{self.shapes.api}/repos/{r.full_name}"
        return {
            "state": state,
            "statuses": [self.status(r, st) for st in latest.values()],
            "sha": sha,
            "total_count": len(latest),
            "repository": self.shapes.repo(r),
            "commit_url": f"{api}/commits/{sha}",
            "url": f"{api}/commits/{sha}/status",
        }

    def app(self, slug: str) -> dict[str, Any]:
        is_ci = slug == CI_APP_SLUG
        app_id = self.app_id + 1 if is_ci else self.app_id
        owner = User(id=1, login="shopfloor", type="Organization", created_at=_EPOCH)
        return {
            "id": app_id,
            "slug": slug,
            "client_id": f"Iv1.{app_id:016x}",
            "node_id": node_id("App", app_id),
            "owner": self.shapes.user(owner),
            "name": "shopfloor simulated CI" if is_ci else "shopfloor",
            "description": "Simulated CI" if is_ci else "shopfloor's GitHub App",
            "external_url": self.shapes.base,
            "html_url": f"{self.shapes.base}/apps/{slug}",
            "created_at": iso(_EPOCH),
            "updated_at": iso(_EPOCH),
            "permissions": APP_PERMISSIONS,
            "events": APP_EVENTS,
            "installations_count": 1,
        }

    def _pr_refs(self, r: Repo, sha: str) -> list[dict[str, Any]]:
        api = f"{self.shapes.api}/repos/{r.full_name}"
        mini = {"id": r.id, "url": api, "name": r.name}
        out = []
        for i in r.issues.values():
            if i.pr and i.state == "open" and i.pr.head_sha == sha:
                base_sha = r.git.branches().get(i.pr.base_ref, "")
                out.append(
                    {
                        "url": f"{api}/pulls/{i.number}",
                        "id": i.pr.id,
                        "number": i.number,
                        "head": {"ref": i.pr.head_ref, "sha": sha, "repo": mini},
                        "base": {"ref": i.pr.base_ref, "sha": base_sha, "repo": mini},
                    }
                )
        return out

    def suite(self, r: Repo, cs: CheckSuite) -> dict[str, Any]:
        runs = [c for c in r.check_runs.values() if c.suite.id == cs.id]
        status, conclusion = suite_state(runs)
        api = f"{self.shapes.api}/repos/{r.full_name}"
        commit = r.git.commit(cs.head_sha)
        head_commit = {
            "id": cs.head_sha,
            "tree_id": commit.tree_sha,
            "message": commit.message,
            "timestamp": _ts(commit.committer_date),
            "author": {"name": commit.author_name, "email": commit.author_email},
            "committer": {"name": commit.committer_name, "email": commit.committer_email},
        }
        return {
            "id": cs.id,
            "node_id": node_id("CheckSuite", cs.id),
            "head_branch": cs.head_branch,
            "head_sha": cs.head_sha,
            "status": status,
            "conclusion": conclusion,
            "url": f"{api}/check-suites/{cs.id}",
            "before": cs.before,
            "after": cs.after,
            "pull_requests": self._pr_refs(r, cs.head_sha),
            "app": self.app(cs.app_slug),
            "repository": self.shapes.repo(r),
            "created_at": iso(cs.created_at),
            "updated_at": iso(cs.updated_at),
            "head_commit": head_commit,
            "latest_check_runs_count": len(runs),
            "check_runs_url": f"{api}/check-suites/{cs.id}/check-runs",
            "rerequestable": True,
            "runs_rerequestable": True,
        }

    def check_run(self, r: Repo, c: CheckRun, *, with_suite_detail: bool = False) -> dict[str, Any]:
        api = f"{self.shapes.api}/repos/{r.full_name}"
        html = f"{self.shapes.base}/{r.full_name}/runs/{c.id}"
        out = c.output
        suite: dict[str, Any] = {"id": c.suite.id}
        if with_suite_detail:
            suite = self.suite(r, c.suite)
        return {
            "id": c.id,
            "head_sha": c.head_sha,
            "node_id": node_id("CheckRun", c.id),
            "external_id": c.external_id or "",
            "url": f"{api}/check-runs/{c.id}",
            "html_url": html,
            "details_url": c.details_url or html,
            "status": c.status,
            "conclusion": c.conclusion,
            "started_at": iso(c.started_at),
            "completed_at": iso(c.completed_at),
            "output": {
                "title": out.get("title"),
                "summary": out.get("summary"),
                "text": out.get("text"),
                "annotations_count": 0,
                "annotations_url": f"{api}/check-runs/{c.id}/annotations",
            },
            "name": c.name,
            "check_suite": suite,
            "app": self.app(c.suite.app_slug),
            "pull_requests": self._pr_refs(r, c.head_sha),
        }

    def hook(self, r: Repo, h: Hook) -> dict[str, Any]:
        api = f"{self.shapes.api}/repos/{r.full_name}/hooks/{h.id}"
        config: dict[str, Any] = {"url": h.url, "content_type": h.content_type, "insecure_ssl": h.insecure_ssl}
        if h.secret:
            config["secret"] = "********"  # GitHub never returns the secret
        return {
            "type": "Repository",
            "id": h.id,
            "name": "web",
            "active": h.active,
            "events": h.events,
            "config": config,
            "updated_at": iso(h.updated_at),
            "created_at": iso(h.created_at),
            "url": api,
            "test_url": api + "/test",
            "ping_url": api + "/pings",
            "deliveries_url": api + "/deliveries",
            "last_response": h.last_response,
        }

    @staticmethod
    def delivery_item(d: Delivery) -> dict[str, Any]:
        return {
            "id": d.id,
            "guid": d.guid,
            "delivered_at": iso(d.delivered_at) or iso(_EPOCH),
            "redelivery": d.redelivery,
            "duration": d.duration,
            "status": d.status,
            "status_code": d.status_code,
            "event": d.event,
            "action": d.action,
            "installation_id": d.installation_id,
            "repository_id": d.repository_id,
            "throttled_at": None,
        }

    def delivery(self, d: Delivery) -> dict[str, Any]:
        data = self.delivery_item(d)
        headers = {k: v for k, v in d.request_headers.items()}
        data.update(
            {
                "url": d.url,
                "request": {"headers": headers, "payload": d.payload},
                "response": {"headers": d.response_headers or None, "payload": d.response_body},
            }
        )
        return data


def suite_state(runs: list[CheckRun]) -> tuple[str, str | None]:
    if not runs or any(c.status != "completed" for c in runs):
        return ("queued" if not runs else "in_progress"), None
    conclusions = {c.conclusion for c in runs}
    for worst in ("failure", "timed_out", "cancelled", "action_required", "neutral"):
        if worst in conclusions:
            return "completed", worst if worst != "neutral" or conclusions == {"neutral"} else "success"
    return "completed", "success"


def _ts(value: Any) -> str:
    return git_date(value)
