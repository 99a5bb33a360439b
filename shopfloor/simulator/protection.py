"""Branch protection as GitHub applies it: required status checks, required approving reviews,
push restrictions and admin enforcement, and what each refuses.

The rules are GitHub's classic branch protection (`PUT /repos/{o}/{r}/branches/{b}/protection`).
A protected branch takes no direct push when it requires reviews or checks or restricts who may
push (admins bypass unless `enforce_admins`), and no deletion; a pull request into it merges only
when every required check passed on its head, enough writers approved the head (not its author),
and, with `strict`, the head contains the base's tip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from shopfloor.simulator.store import BOT_LOGIN, Issue, Repo, User

PASSING_CONCLUSIONS = frozenset({"success", "neutral", "skipped"})


class _Checks(BaseModel):
    strict: bool = False
    contexts: list[str] = Field(default_factory=list)
    checks: list[dict[str, Any]] = Field(default_factory=list)


class _Reviews(BaseModel):
    dismiss_stale_reviews: bool = False
    require_code_owner_reviews: bool = False
    require_last_push_approval: bool = False
    required_approving_review_count: int = Field(default=1, ge=0, le=6)


class _Restrictions(BaseModel):
    users: list[str] = Field(default_factory=list)
    teams: list[str] = Field(default_factory=list)
    apps: list[str] = Field(default_factory=list)


class ProtectionBody(BaseModel):
    """The body of `PUT …/protection`: GitHub requires all four keys, each may be null."""

    required_status_checks: _Checks | None
    enforce_admins: bool | None
    required_pull_request_reviews: _Reviews | None
    restrictions: _Restrictions | None


@dataclass
class Protection:
    contexts: list[str] = field(default_factory=list)  # required check names
    strict: bool = False  # the head must contain the base's tip
    required_approvals: int | None = None  # None: no review requirement
    enforce_admins: bool = False
    push_users: list[str] | None = None  # None: anyone with write access may push
    push_apps: list[str] | None = None

    @classmethod
    def of(cls, body: ProtectionBody) -> Protection:
        checks = body.required_status_checks
        named = [
            *(checks.contexts if checks else []),
            *(str(c.get("context")) for c in (checks.checks if checks else [])),
        ]
        contexts = sorted({c for c in named if c and c != "None"})
        reviews = body.required_pull_request_reviews
        limits = body.restrictions
        return cls(
            contexts=contexts,
            strict=bool(checks and checks.strict),
            required_approvals=reviews.required_approving_review_count if reviews else None,
            enforce_admins=bool(body.enforce_admins),
            push_users=[u.lower() for u in limits.users] if limits else None,
            push_apps=[a.lower() for a in limits.apps] if limits else None,
        )

    def may_push(self, user: User) -> bool:
        if self.push_users is None:
            return True
        if user.login == BOT_LOGIN:
            return BOT_LOGIN.removesuffix("[bot]") in (self.push_apps or [])
        return user.login.lower() in self.push_users

    def push_refusals(self, user: User, is_admin: bool) -> list[str]:
        """GitHub's reasons any direct push by `user` is refused; empty: a fast-forward may land
        (deleting the branch and force-pushing to it are refused whoever pushes: pre_receive.py)."""
        if is_admin and not self.enforce_admins:
            return []
        reasons: list[str] = []
        if not self.may_push(user):
            reasons.append("You're not authorized to push to this branch.")
        if self.required_approvals is not None:
            reasons.append("Changes must be made through a pull request.")
        reasons.extend(f'Required status check "{c}" is expected.' for c in self.contexts)
        return reasons


def ref_refusal(
    r: Repo, user: User, branch: str, *, admin: bool, deleting: bool = False, forced: bool = False
) -> str | None:
    """Why a REST write that moves `branch` (the refs or contents API) is refused; None: it may."""
    rule = r.protections.get(branch)
    if rule is None:
        return None
    reasons = rule.push_refusals(user, admin)
    if deleting:
        reasons = ["Cannot delete this protected branch"]
    elif forced and not reasons:
        reasons = ["Cannot force-push to this branch"]
    return f"Protected branch update failed for refs/heads/{branch}: {' '.join(reasons)}" if reasons else None


def check_states(r: Repo, sha: str) -> dict[str, str]:
    """The latest state of each status context and check run on `sha`: success, failure or pending."""
    states: dict[str, str] = {}
    for status in sorted((s for s in r.statuses if s.sha == sha), key=lambda s: s.id):
        states[status.context] = {"success": "success", "pending": "pending"}.get(status.state, "failure")
    for run in sorted((c for c in r.check_runs.values() if c.head_sha == sha), key=lambda c: c.id):
        if run.status != "completed":
            states[run.name] = "pending"
        else:
            states[run.name] = "success" if run.conclusion in PASSING_CONCLUSIONS else "failure"
    return states


def approvals(r: Repo, issue: Issue, can_write: Any) -> int:
    """Writers (not the author) whose latest approving-or-blocking review approves the head."""
    assert issue.pr is not None
    latest: dict[str, Any] = {}
    for review in issue.pr.reviews:
        if review.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[review.user.login] = review
    return sum(
        1
        for login, review in latest.items()
        if review.state == "APPROVED"
        and review.commit_id == issue.pr.head_sha
        and login != issue.user.login
        and can_write(review.user)
    )


def merge_refusal(r: Repo, issue: Issue, protection: Protection, can_write: Any, base_tip: str | None) -> str | None:
    """GitHub's 405 message when `protection` keeps the pull request from merging; None: it may."""
    pr = issue.pr
    assert pr is not None
    states = check_states(r, pr.head_sha)
    missing = [c for c in protection.contexts if states.get(c) != "success"]
    if protection.required_approvals and approvals(r, issue, can_write) < protection.required_approvals:
        n = protection.required_approvals
        return f"At least {n} approving review{'s are' if n > 1 else ' is'} required by reviewers with write access."
    if missing:
        if len(missing) == 1:
            state = states.get(missing[0])
            return f'Required status check "{missing[0]}" is {"failing" if state == "failure" else "expected"}.'
        return f"{len(missing)} of {len(protection.contexts)} required status checks are expected."
    if protection.strict and base_tip is not None and not r.git.is_ancestor(base_tip, pr.head_sha):
        return "Head branch is out of date. Update the branch and try the merge again."
    return None
