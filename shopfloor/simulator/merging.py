"""What merging a pull request does: move the base branch in git, mark the PR merged, emit the
push and `closed` webhooks, and close the issues its title or body names with GitHub's closing
keywords (only when the base is the default branch, as on GitHub)."""

from __future__ import annotations

import re
from typing import Any

from shopfloor.simulator.api.issues import close
from shopfloor.simulator.auth import can
from shopfloor.simulator.errors import GitHubError
from shopfloor.simulator.git.merge import Method
from shopfloor.simulator.git.repos import GitError, MergeConflict, RefUpdate
from shopfloor.simulator.protection import merge_refusal
from shopfloor.simulator.store import Issue, Repo, User, now

CLOSING_RE = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE)
NOT_MERGEABLE = "Pull Request is not mergeable"


def closing_refs(*texts: str | None) -> list[int]:
    found: list[int] = []
    for text in texts:
        for m in CLOSING_RE.finditer(text or ""):
            n = int(m.group(1))
            if n not in found:
                found.append(n)
    return found


def merge_pull(
    sim: Any,
    r: Repo,
    issue: Issue,
    user: User,
    *,
    method: Method,
    title: str | None,
    message: str | None,
    sha: str | None,
) -> dict[str, Any]:
    """Merge under the store lock; returns GitHub's merge result body."""
    pr = issue.pr
    assert pr is not None
    if pr.merged or issue.state != "open":
        raise GitHubError(405, NOT_MERGEABLE)
    if sha is not None and sha != pr.head_sha:
        raise GitHubError(409, "Head branch was modified. Review and try the merge again.")
    if pr.draft:
        raise GitHubError(405, "Pull Request is still a draft")
    base_before = r.git.ref_sha(pr.base_ref)
    if base_before is None:
        raise GitHubError(405, NOT_MERGEABLE)
    rule = r.protections.get(pr.base_ref)
    if rule is not None:
        refused = merge_refusal(r, issue, rule, lambda u: can(r, u, "write"), base_before)
        if refused is not None:
            raise GitHubError(405, refused)
    if method == "squash":
        default_title = f"{issue.title} (#{issue.number})"
        commits = r.git.commits_between(r.git.merge_base(base_before, pr.head_sha) or base_before, pr.head_sha)
        default_message = "\n\n".join(f"* {c.message.strip()}" for c in commits)
    else:
        default_title = f"Merge pull request #{issue.number} from {(pr.head_repo or r).owner.login}/{pr.head_ref}"
        default_message = issue.title
    author = (user.login, f"{user.id}+{user.login}@users.noreply.simulator")
    try:
        new_sha = r.git.merge(
            pr.base_ref,
            pr.head_sha,
            method=method,
            title=title or default_title,
            message=message if message is not None else default_message,
            author=author,
        )
    except MergeConflict:
        raise GitHubError(405, NOT_MERGEABLE) from None
    except GitError as exc:
        raise GitHubError(405, f"{NOT_MERGEABLE}: {exc}") from None
    t = now()
    pr.merged, pr.merged_at, pr.merged_by, pr.merge_commit_sha = True, t, user, new_sha
    pr.frozen_base_sha = base_before
    sim.refs_moved(r, user, [RefUpdate(f"refs/heads/{pr.base_ref}", base_before, new_sha)])
    close(sim, r, issue, user, None, merged=True)
    if pr.base_ref == r.default_branch:
        for number in closing_refs(issue.title, issue.body):
            target = r.issues.get(number)
            if target is not None and target.pr is None and target.state == "open":
                close(sim, r, target, user, "completed")
    return {"sha": new_sha, "merged": True, "message": "Pull Request successfully merged"}
