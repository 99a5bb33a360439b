"""GitHub-shaped JSON for pull requests and reviews, with git-derived fields computed live."""

from __future__ import annotations

from typing import Any

from shopfloor.simulator.auth import can
from shopfloor.simulator.protection import merge_refusal
from shopfloor.simulator.shapes.common import Shapes, iso, node_id
from shopfloor.simulator.store import Issue, Repo, Review

FAILING = {"failure", "timed_out", "cancelled", "action_required", "startup_failure"}


class PullShapes:
    def __init__(self, shapes: Shapes) -> None:
        self.shapes = shapes

    def base_sha(self, r: Repo, i: Issue) -> str:
        assert i.pr is not None
        if i.pr.frozen_base_sha:
            return i.pr.frozen_base_sha
        return r.git.branches().get(i.pr.base_ref) or i.pr.head_sha

    def mergeable(self, r: Repo, i: Issue, *, asked: bool = False) -> tuple[bool | None, str]:
        """GitHub's `mergeable` and `mergeable_state`. GitHub computes them in the background: the
        first read of the pull request after its head or base moved (`asked`) answers null and
        starts the job, later reads get the result; a webhook or a write's answer carries only
        a result already computed."""
        pr = i.pr
        assert pr is not None
        if i.state != "open":
            return None, "unknown"
        base = r.git.branches().get(pr.base_ref)
        if base is None:
            return None, "unknown"
        if pr.mergeability_for != (pr.head_sha, base):
            if asked:  # the job runs now; its answer (and refs/pull/<n>/merge) is there for the next read
                pr.mergeability_for = (pr.head_sha, base)
                r.git.set_test_merge(i.number, base, pr.head_sha)
            return None, "unknown"
        if not r.git.can_merge(base, pr.head_sha):
            return False, "dirty"
        if pr.draft:
            return True, "draft"
        rule = r.protections.get(pr.base_ref)
        if rule is not None and merge_refusal(r, i, rule, lambda u: can(r, u, "write"), base) is not None:
            return True, "blocked"
        runs = [c for c in r.check_runs.values() if c.head_sha == pr.head_sha]
        statuses = {s.context: s for s in r.statuses if s.sha == pr.head_sha}  # latest per context wins
        if any(c.status != "completed" for c in runs) or any(s.state == "pending" for s in statuses.values()):
            return True, "unstable"
        if any(c.conclusion in FAILING for c in runs) or any(
            s.state in ("failure", "error") for s in statuses.values()
        ):
            return True, "unstable"
        return True, "clean"

    def _side(self, r: Repo, ref: str, sha: str) -> dict[str, Any]:
        """`head` or `base`; a fork's head is labelled and shaped as its own repository."""
        return {
            "label": f"{r.owner.login}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.shapes.user(r.owner),
            "repo": self.shapes.repo(r),
        }

    def simple(self, r: Repo, i: Issue) -> dict[str, Any]:
        pr = i.pr
        assert pr is not None
        api = f"{self.shapes.api}/repos/{r.full_name}"
        url = f"{api}/pulls/{i.number}"
        html = f"{self.shapes.base}/{r.full_name}/pull/{i.number}"
        issue_url = f"{api}/issues/{i.number}"
        statuses = f"{api}/statuses/{pr.head_sha}"
        return {
            "url": url,
            "id": pr.id,
            "node_id": node_id("PullRequest", pr.id),
            "html_url": html,
            "diff_url": html + ".diff",
            "patch_url": html + ".patch",
            "issue_url": issue_url,
            "commits_url": url + "/commits",
            "review_comments_url": url + "/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": issue_url + "/comments",
            "statuses_url": statuses,
            "number": i.number,
            "state": i.state,
            "locked": False,
            "title": i.title,
            "user": self.shapes.user(i.user),
            "body": i.body,
            "labels": [self.shapes.label(r, lab) for lab in i.labels],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": iso(i.created_at),
            "updated_at": iso(i.updated_at),
            "closed_at": iso(i.closed_at),
            "merged_at": iso(pr.merged_at),
            "merge_commit_sha": pr.merge_commit_sha,
            "assignee": self.shapes.user(i.assignees[0]) if i.assignees else None,
            "assignees": [self.shapes.user(a) for a in i.assignees],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self._side(pr.head_repo or r, pr.head_ref, pr.head_sha),
            "base": self._side(r, pr.base_ref, self.base_sha(r, i)),
            "_links": {
                k: {"href": v}
                for k, v in {
                    "self": url,
                    "html": html,
                    "issue": issue_url,
                    "comments": issue_url + "/comments",
                    "review_comments": url + "/comments",
                    "review_comment": f"{api}/pulls/comments{{/number}}",
                    "commits": url + "/commits",
                    "statuses": statuses,
                }.items()
            },
            "author_association": self.shapes.author_association(r, i.user),
            "auto_merge": None,
            "draft": pr.draft,
        }

    def full(self, r: Repo, i: Issue, *, asked: bool = False) -> dict[str, Any]:
        """GitHub's `pull-request`; `asked`: a read of this one pull request (see `mergeable`)."""
        pr = i.pr
        assert pr is not None
        data = self.simple(r, i)
        base_sha = data["base"]["sha"]
        merge_base = r.git.merge_base(base_sha, pr.head_sha) or base_sha
        commits = r.git.commits_between(merge_base, pr.head_sha)
        files = r.git.changed_files(merge_base, pr.head_sha)
        mergeable, state = self.mergeable(r, i, asked=asked)
        data.update(
            {
                "merged": pr.merged,
                "mergeable": mergeable,
                "rebaseable": mergeable,
                "mergeable_state": state,
                "merged_by": self.shapes.user(pr.merged_by),
                "comments": len(i.comments),
                "review_comments": sum(len(rv.comments) for rv in pr.reviews),
                "maintainer_can_modify": pr.maintainer_can_modify,
                "commits": len(commits),
                "additions": sum(f.additions for f in files),
                "deletions": sum(f.deletions for f in files),
                "changed_files": len(files),
            }
        )
        return data

    def review_comment(self, r: Repo, i: Issue, rv: Review, c: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.shapes.api}/repos/{r.full_name}/pulls"
        html = f"{self.shapes.base}/{r.full_name}/pull/{i.number}#discussion_r{c['id']}"
        return {
            "id": c["id"],
            "node_id": node_id("PullRequestReviewComment", c["id"]),
            "pull_request_review_id": rv.id,
            "path": c["path"],
            "line": c.get("line"),
            "original_line": c.get("line"),
            "start_line": c.get("start_line"),
            "original_start_line": c.get("start_line"),
            "start_side": c.get("start_side"),
            "side": c.get("side") or "RIGHT",
            "position": c.get("position"),
            "original_position": c.get("position") or c.get("line") or 1,  # comments kept before positions were
            "subject_type": "line",
            "reactions": {
                "url": f"{url}/comments/{c['id']}/reactions",
                "total_count": 0,
                **dict.fromkeys(("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"), 0),
            },
            "body": c["body"],
            "commit_id": rv.commit_id,
            "original_commit_id": rv.commit_id,
            "diff_hunk": c.get("diff_hunk") or "",
            **({"in_reply_to_id": c["in_reply_to_id"]} if c.get("in_reply_to_id") else {}),
            "user": self.shapes.user(rv.user),
            "created_at": iso(rv.submitted_at),
            "updated_at": iso(rv.submitted_at),
            "url": f"{url}/comments/{c['id']}",
            "html_url": html,
            "pull_request_url": f"{url}/{i.number}",
            "author_association": self.shapes.author_association(r, rv.user),
            "_links": {
                "self": {"href": f"{url}/comments/{c['id']}"},
                "html": {"href": html},
                "pull_request": {"href": f"{url}/{i.number}"},
            },
        }

    def review(self, r: Repo, i: Issue, rv: Review) -> dict[str, Any]:
        url = f"{self.shapes.api}/repos/{r.full_name}/pulls/{i.number}"
        html = f"{self.shapes.base}/{r.full_name}/pull/{i.number}#pullrequestreview-{rv.id}"
        return {
            "id": rv.id,
            "node_id": node_id("PullRequestReview", rv.id),
            "user": self.shapes.user(rv.user),
            "body": rv.body,
            "state": rv.state,
            "html_url": html,
            "pull_request_url": url,
            "_links": {"html": {"href": html}, "pull_request": {"href": url}},
            "submitted_at": iso(rv.submitted_at),
            "commit_id": rv.commit_id,
            "author_association": self.shapes.author_association(r, rv.user),
        }
