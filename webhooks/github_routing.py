"""Which workflow(s) a parsed GitHub event goes to — or why it goes nowhere. Pure.

Routing of shopfloor's own pull requests: their head branch derives from the issue workflow's id,
`shopfloor/issue-<n>`, so events about such a PR (pull_request, reviews and their line comments, check runs,
check suites, workflow runs, statuses) go to `issue/<repo>/<n>`, the workflow that opened it —
never to a PullRequestWorkflow (shopfloor does not review itself as if a person had written it).
The branch counts only when it lives in the repository itself (pushing there needs write access;
a fork can name a branch anything).

A comment on a PR carries no branch, and the edge does no work inline (no GitHub call here). A PR
opened by our bot login is routed by the marker `<!-- shopfloor:issue/<repo>/<n>:pr -->` that
*ends* its body: the workflow writes it there after the model's text, which the write activity
cleaned of every HTML comment (agents/github_text.py), so no text the model wrote can come after
it or be one. A marker anywhere else in the body routes nothing. The issue workflow then acts on
a comment from a pull request only if it is the pull request it opened itself (the number it
recorded when it found or created the PR by its `shopfloor/issue-<n>` branch): a body a person
edited to point elsewhere cannot carry commands into another issue's run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from shopfloor.models.github_events import (
    CheckRunEvent,
    CheckSuiteEvent,
    IssueCommentEvent,
    IssuesEvent,
    PullRequestEvent,
    PullRequestReviewCommentEvent,
    PullRequestReviewEvent,
    StatusEvent,
    WorkflowRunEvent,
)
from shopfloor.models.github_objects import PullRequest
from shopfloor.models.inbox import (
    ISSUE_WORKFLOW,
    PULL_REQUEST_WORKFLOW,
    REPO_PATTERN,
    issue_workflow_id,
    pr_workflow_id,
)

OUR_BRANCH = re.compile(r"^shopfloor/issue-([1-9][0-9]{0,9})$")
REPO_NAME = re.compile(REPO_PATTERN)

ISSUE_ACTIONS = {"opened", "edited", "labeled", "unlabeled", "closed", "reopened"}
PR_ACTIONS = {"opened", "reopened", "synchronize", "closed", "edited", "ready_for_review"}
# Events that may (re)start work on a closed workflow; all others only reach a running one.
ISSUE_STARTERS = {"opened", "reopened", "labeled"}
PR_STARTERS = {"opened", "reopened", "ready_for_review", "synchronize"}
# Why kinds that have a model but no route go nowhere (any other kind: "... are not routed").
NOT_ROUTED = {
    "push": "push: pull_request.synchronize and check events carry what workflows need",
    "installation": "installation events start no workflow",
}


@dataclass(frozen=True)
class Target:
    workflow: str  # ISSUE_WORKFLOW | PULL_REQUEST_WORKFLOW
    workflow_id: str
    number: int  # the workflow's issue or PR number (its input)
    restart_closed: bool = False


@dataclass
class Route:
    targets: list[Target] = field(default_factory=list)
    ignored: str | None = None  # the reason, when there are no targets


@dataclass(frozen=True)
class RouteContext:
    """What routing an event needs besides the event: its (checked) repository and our settings."""

    repo: str
    bot_login: str
    trigger_label: str


def ignore(reason: str) -> Route:
    return Route(ignored=reason)


def our_issue_number(branch: str | None) -> int | None:
    match = OUR_BRANCH.match(branch or "")
    return int(match.group(1)) if match else None


def marker_issue_number(body: str | None, repo: str) -> int | None:
    """The issue named by the `pr` marker that ends `body` (None: the body does not end with one)."""
    pattern = r"<!-- shopfloor:issue/" + re.escape(repo) + r"/([1-9][0-9]{0,9}):pr -->\Z"
    match = re.search(pattern, (body or "").rstrip())
    return int(match.group(1)) if match else None


def _issue(repo: str, n: int, restart: bool = False) -> Target:
    return Target(ISSUE_WORKFLOW, issue_workflow_id(repo, n), n, restart)


def _pr(repo: str, n: int, restart: bool = False) -> Target:
    return Target(PULL_REQUEST_WORKFLOW, pr_workflow_id(repo, n), n, restart)


def _for_pull_request(repo: str, pr: PullRequest, restart: bool) -> Route:
    head_repo = pr.head.repo.full_name if pr.head.repo is not None else None
    if pr.head.ref.startswith("shopfloor/") and head_repo in (None, repo):
        n = our_issue_number(pr.head.ref)
        if n is None:
            return ignore(f"shopfloor branch {pr.head.ref!r} names no issue")
        return Route([_issue(repo, n)])  # never restarts the issue run that made the PR
    return Route([_pr(repo, pr.number, restart)])


def _for_head(repo: str, branch: str | None, prs: list[int], what: str) -> Route:
    n = our_issue_number(branch)
    if n is not None:
        return Route([_issue(repo, n)])
    if (branch or "").startswith("shopfloor/"):
        return ignore(f"{what} on shopfloor branch {branch!r} that names no issue")
    if not prs:
        return ignore(f"{what} names no pull request")
    return Route([_pr(repo, number) for number in dict.fromkeys(prs)])


# --- one function per routed kind (the table in github_event_kinds.py pairs each with its model) ---


def route_issues(event: IssuesEvent, at: RouteContext) -> Route:
    action = event.action
    if action not in ISSUE_ACTIONS:
        return ignore(f"issues.{action} is not routed")
    restart = action in ISSUE_STARTERS and (action != "labeled" or event.label_name == at.trigger_label)
    return Route([_issue(at.repo, event.issue.number, restart)])


def route_issue_comment(event: IssueCommentEvent, at: RouteContext) -> Route:
    if event.action != "created":
        return ignore(f"issue_comment.{event.action} is not routed")
    if event.issue.pull_request is None:
        return Route([_issue(at.repo, event.issue.number, restart=True)])
    if event.issue.user.login == at.bot_login:
        n = marker_issue_number(event.issue.body, at.repo)
        if n is None:
            return ignore("comment on a shopfloor pull request whose body does not end with its workflow marker")
        return Route([_issue(at.repo, n)])
    return Route([_pr(at.repo, event.issue.number, restart=True)])


def route_pull_request(event: PullRequestEvent, at: RouteContext) -> Route:
    if event.action not in PR_ACTIONS:
        return ignore(f"pull_request.{event.action} is not routed")
    return _for_pull_request(at.repo, event.pull_request, event.action in PR_STARTERS)


def route_pull_request_review(event: PullRequestReviewEvent, at: RouteContext) -> Route:
    if event.action != "submitted":
        return ignore(f"pull_request_review.{event.action} is not routed")
    return _for_pull_request(at.repo, event.pull_request, restart=False)


def route_pull_request_review_comment(event: PullRequestReviewCommentEvent, at: RouteContext) -> Route:
    # A line comment is routed as its review is; an edit or a deletion is not feedback to act on.
    if event.action != "created":
        return ignore(f"pull_request_review_comment.{event.action} is not routed")
    return _for_pull_request(at.repo, event.pull_request, restart=False)


def route_check_run(event: CheckRunEvent, at: RouteContext) -> Route:
    if event.action != "completed":
        return ignore(f"check_run.{event.action} is not routed")
    run = event.check_run
    return _for_head(at.repo, run.head_branch, run.pull_requests, "check_run")


def route_check_suite(event: CheckSuiteEvent, at: RouteContext) -> Route:
    if event.action != "completed":
        return ignore(f"check_suite.{event.action} is not routed")
    return _for_head(at.repo, event.check_suite.head_branch, event.check_suite.pull_requests, "check_suite")


def route_workflow_run(event: WorkflowRunEvent, at: RouteContext) -> Route:
    if event.action != "completed":
        return ignore(f"workflow_run.{event.action} is not routed")
    return _for_head(at.repo, event.workflow_run.head_branch, event.workflow_run.pull_requests, "workflow_run")


def route_status(event: StatusEvent, at: RouteContext) -> Route:
    # A status names only a commit and the branches holding it: only ours can be placed.
    issues = [n for n in (our_issue_number(b) for b in event.branches) if n is not None]
    if not issues:
        return ignore("status on no shopfloor/issue-<n> branch (a status names no pull request)")
    return Route([_issue(at.repo, n) for n in dict.fromkeys(issues)])
