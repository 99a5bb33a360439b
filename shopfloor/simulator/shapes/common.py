"""GitHub-shaped JSON for users, repositories, labels, issues and comments.

Every URL is built from the simulator's own base URL: PyGithub refuses to follow links to a host
other than the one it was configured with. Shapes are supersets of the REST and webhook schemas,
so one function serves both the API and the webhook payloads.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from shopfloor.simulator.store import Comment, Issue, Label, Repo, Store, User

DOCS = "https://docs.github.com/rest"


def iso(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def node_id(kind: str, ident: int | str) -> str:
    return base64.b64encode(f"0:{kind}{ident}".encode()).decode().rstrip("=")


class Shapes:
    def __init__(self, base_url: str, store: Store) -> None:
        self.base = base_url.rstrip("/")
        self.api = self.base + "/api/v3"
        self.store = store

    # ---- users ---------------------------------------------------------------------------
    def user(self, u: User | None) -> dict[str, Any] | None:
        if u is None:
            return None
        api = f"{self.api}/users/{u.login}"
        return {
            "login": u.login,
            "id": u.id,
            "node_id": node_id("User", u.id),
            "avatar_url": f"{self.base}/avatars/{u.login}",
            "gravatar_id": "",
            "url": api,
            "html_url": f"{self.base}/{u.login}",
            "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos",
            "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": u.type,
            "site_admin": False,
            "user_view_type": "public",
        }

    def full_user(self, u: User, *, private: bool = False) -> dict[str, Any]:
        data = self.user(u) or {}
        owned = sum(1 for r in self.store.repos.values() if r.owner.id == u.id)
        data.update(
            {
                "name": u.login,
                "company": None,
                "blog": "",
                "location": None,
                "email": None,
                "hireable": None,
                "bio": None,
                "twitter_username": None,
                "public_repos": owned,
                "public_gists": 0,
                "followers": 0,
                "following": 0,
                "created_at": iso(u.created_at),
                "updated_at": iso(u.created_at),
            }
        )
        if private:
            data.update(
                {
                    "private_gists": 0,
                    "total_private_repos": 0,
                    "owned_private_repos": 0,
                    "disk_usage": 0,
                    "collaborators": 0,
                    "two_factor_authentication": False,
                }
            )
        return data

    # ---- repositories --------------------------------------------------------------------
    def repo(self, r: Repo, *, full: bool = False, push_style: bool = False) -> dict[str, Any]:
        api = f"{self.api}/repos/{r.full_name}"
        open_issues = sum(1 for i in r.issues.values() if i.state == "open")
        created: Any = iso(r.created_at)
        pushed: Any = iso(r.pushed_at)
        if push_style:  # push payloads carry epoch seconds here, like GitHub's
            created, pushed = int(r.created_at.timestamp()), int(r.pushed_at.timestamp())
        data: dict[str, Any] = {
            "id": r.id,
            "node_id": node_id("Repository", r.id),
            "name": r.name,
            "full_name": r.full_name,
            "private": r.private,
            "owner": self.user(r.owner),
            "html_url": f"{self.base}/{r.full_name}",
            "description": r.description,
            "fork": r.parent is not None,
            "url": api,
            "archive_url": f"{api}/{{archive_format}}{{/ref}}",
            "assignees_url": f"{api}/assignees{{/user}}",
            "blobs_url": f"{api}/git/blobs{{/sha}}",
            "branches_url": f"{api}/branches{{/branch}}",
            "collaborators_url": f"{api}/collaborators{{/collaborator}}",
            "comments_url": f"{api}/comments{{/number}}",
            "commits_url": f"{api}/commits{{/sha}}",
            "compare_url": f"{api}/compare/{{base}}...{{head}}",
            "contents_url": f"{api}/contents/{{+path}}",
            "contributors_url": f"{api}/contributors",
            "deployments_url": f"{api}/deployments",
            "downloads_url": f"{api}/downloads",
            "events_url": f"{api}/events",
            "forks_url": f"{api}/forks",
            "git_commits_url": f"{api}/git/commits{{/sha}}",
            "git_refs_url": f"{api}/git/refs{{/sha}}",
            "git_tags_url": f"{api}/git/tags{{/sha}}",
            "git_url": f"{self.base}/{r.full_name}.git",
            "issue_comment_url": f"{api}/issues/comments{{/number}}",
            "issue_events_url": f"{api}/issues/events{{/number}}",
            "issues_url": f"{api}/issues{{/number}}",
            "keys_url": f"{api}/keys{{/key_id}}",
            "labels_url": f"{api}/labels{{/name}}",
            "languages_url": f"{api}/languages",
            "merges_url": f"{api}/merges",
            "milestones_url": f"{api}/milestones{{/number}}",
            "notifications_url": f"{api}/notifications{{?since,all,participating}}",
            "pulls_url": f"{api}/pulls{{/number}}",
            "releases_url": f"{api}/releases{{/id}}",
            "ssh_url": f"{self.base}/{r.full_name}.git",
            "stargazers_url": f"{api}/stargazers",
            "statuses_url": f"{api}/statuses/{{sha}}",
            "subscribers_url": f"{api}/subscribers",
            "subscription_url": f"{api}/subscription",
            "tags_url": f"{api}/tags",
            "teams_url": f"{api}/teams",
            "trees_url": f"{api}/git/trees{{/sha}}",
            "clone_url": f"{self.base}/{r.full_name}.git",
            "mirror_url": None,
            "hooks_url": f"{api}/hooks",
            "svn_url": f"{self.base}/{r.full_name}",
            "homepage": None,
            "language": None,
            "forks_count": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "size": 0,
            "default_branch": r.default_branch,
            "open_issues_count": open_issues,
            "is_template": False,
            "topics": [],
            "has_issues": True,
            "has_projects": False,
            "has_wiki": False,
            "has_pages": False,
            "has_downloads": True,
            "has_discussions": False,
            "archived": False,
            "disabled": False,
            "visibility": "private" if r.private else "public",
            "pushed_at": pushed,
            "created_at": created,
            "updated_at": iso(r.updated_at),
            "allow_forking": True,
            "web_commit_signoff_required": False,
            "license": None,
            "forks": 0,
            "open_issues": open_issues,
            "watchers": 0,
        }
        if push_style:
            data["owner"] = {**(self.user(r.owner) or {}), "name": r.owner.login, "email": None}
            data.update({"stargazers": 0, "master_branch": r.default_branch})
        if full:
            data.update(
                {
                    "permissions": {"admin": True, "maintain": True, "push": True, "triage": True, "pull": True},
                    "allow_rebase_merge": True,
                    "allow_squash_merge": True,
                    "allow_merge_commit": True,
                    "allow_auto_merge": False,
                    "delete_branch_on_merge": False,
                    "allow_update_branch": True,
                    "use_squash_pr_title_as_default": False,
                    "squash_merge_commit_title": "COMMIT_OR_PR_TITLE",
                    "squash_merge_commit_message": "COMMIT_MESSAGES",
                    "merge_commit_title": "MERGE_MESSAGE",
                    "merge_commit_message": "PR_TITLE",
                    "subscribers_count": 0,
                    "network_count": 0,
                    "temp_clone_token": None,
                }
            )
            if r.parent is not None:  # one level of forks: parent and source are the same
                data["parent"] = data["source"] = self.repo(r.parent)
        return data

    # ---- labels, issues, comments ----------------------------------------------------------
    def label(self, r: Repo, lab: Label) -> dict[str, Any]:
        return {
            "id": lab.id,
            "node_id": node_id("Label", lab.id),
            "url": f"{self.api}/repos/{r.full_name}/labels/{lab.name}",
            "name": lab.name,
            "color": lab.color,
            "default": lab.default,
            "description": lab.description,
            "archived_at": None,
            "archived_by": None,
        }

    @staticmethod
    def reactions(url: str) -> dict[str, Any]:
        return {
            "url": url + "/reactions",
            "total_count": 0,
            "+1": 0,
            "-1": 0,
            "laugh": 0,
            "hooray": 0,
            "confused": 0,
            "heart": 0,
            "rocket": 0,
            "eyes": 0,
        }

    def author_association(self, r: Repo, u: User) -> str:
        if u.id == r.owner.id:
            return "OWNER"
        if r.collaborators.get(u.login.lower()) in ("write", "maintain", "admin", "triage"):
            return "COLLABORATOR"
        return "NONE"

    def issue(self, r: Repo, i: Issue) -> dict[str, Any]:
        api = f"{self.api}/repos/{r.full_name}/issues/{i.number}"
        kind = "pull" if i.pr else "issues"
        data: dict[str, Any] = {
            "id": i.id,
            "node_id": node_id("PR" if i.pr else "Issue", i.id),
            "url": api,
            "repository_url": f"{self.api}/repos/{r.full_name}",
            "labels_url": f"{api}/labels{{/name}}",
            "comments_url": f"{api}/comments",
            "events_url": f"{api}/events",
            "html_url": f"{self.base}/{r.full_name}/{kind}/{i.number}",
            "number": i.number,
            "state": i.state,
            "state_reason": i.state_reason,
            "title": i.title,
            "body": i.body,
            "user": self.user(i.user),
            "labels": [self.label(r, lab) for lab in i.labels],
            "assignee": self.user(i.assignees[0]) if i.assignees else None,
            "assignees": [self.user(a) for a in i.assignees],
            "milestone": None,
            "locked": False,
            "active_lock_reason": None,
            "comments": len(i.comments),
            "closed_at": iso(i.closed_at),
            "created_at": iso(i.created_at),
            "updated_at": iso(i.updated_at),
            "closed_by": self.user(i.closed_by),
            "author_association": self.author_association(r, i.user),
            "reactions": self.reactions(api),
            "timeline_url": f"{api}/timeline",
            "performed_via_github_app": None,
            "draft": i.pr.draft if i.pr else False,
        }
        if i.pr:
            pulls = f"{self.api}/repos/{r.full_name}/pulls/{i.number}"
            html = f"{self.base}/{r.full_name}/pull/{i.number}"
            data["pull_request"] = {
                "url": pulls,
                "html_url": html,
                "diff_url": html + ".diff",
                "patch_url": html + ".patch",
                "merged_at": iso(i.pr.merged_at),
            }
        return data

    def comment(self, r: Repo, c: Comment) -> dict[str, Any]:
        api = f"{self.api}/repos/{r.full_name}/issues/comments/{c.id}"
        issue = r.issues.get(c.issue_number)
        kind = "pull" if issue and issue.pr else "issues"
        return {
            "id": c.id,
            "node_id": node_id("IssueComment", c.id),
            "url": api,
            "html_url": f"{self.base}/{r.full_name}/{kind}/{c.issue_number}#issuecomment-{c.id}",
            "body": c.body,
            "user": self.user(c.user),
            "created_at": iso(c.created_at),
            "updated_at": iso(c.updated_at),
            "issue_url": f"{self.api}/repos/{r.full_name}/issues/{c.issue_number}",
            "author_association": self.author_association(r, c.user),
            "performed_via_github_app": None,
            "reactions": self.reactions(api),
        }
