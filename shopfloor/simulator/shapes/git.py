"""GitHub-shaped JSON for git objects: commits, branches, refs, file contents and diff entries."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from shopfloor.simulator.git.repos import CommitInfo, FileChange
from shopfloor.simulator.shapes.common import Shapes, node_id
from shopfloor.simulator.store import Repo


def git_date(value: Any) -> str:
    """git.repos hands dates as ISO strings or datetimes; GitHub shows UTC with a Z."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        return datetime.fromisoformat(str(value)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return str(value)


class GitShapes:
    def __init__(self, shapes: Shapes) -> None:
        self.shapes = shapes

    def _api(self, r: Repo) -> str:
        return f"{self.shapes.api}/repos/{r.full_name}"

    def commit(self, r: Repo, c: CommitInfo, *, files: list[FileChange] | None = None) -> dict[str, Any]:
        api = self._api(r)
        data: dict[str, Any] = {
            "url": f"{api}/commits/{c.sha}",
            "sha": c.sha,
            "node_id": node_id("Commit", c.sha),
            "html_url": f"{self.shapes.base}/{r.full_name}/commit/{c.sha}",
            "comments_url": f"{api}/commits/{c.sha}/comments",
            "commit": {"url": f"{api}/git/commits/{c.sha}", **self._git_fields(r, c), "comment_count": 0},
            "author": None,
            "committer": None,
            "parents": [
                {"sha": p, "url": f"{api}/commits/{p}", "html_url": f"{self.shapes.base}/{r.full_name}/commit/{p}"}
                for p in c.parents
            ],
        }
        if files is not None:
            adds, dels = sum(f.additions for f in files), sum(f.deletions for f in files)
            data["stats"] = {"total": adds + dels, "additions": adds, "deletions": dels}
            data["files"] = [self.file(r, c.sha, f) for f in files]
        return data

    def git_commit(self, r: Repo, c: CommitInfo) -> dict[str, Any]:
        """GitHub's `git-commit` (the Git database API's shape, and the contents API's `commit`)."""
        api = self._api(r)
        return {
            "sha": c.sha,
            "node_id": node_id("Commit", c.sha),
            "url": f"{api}/git/commits/{c.sha}",
            "html_url": f"{self.shapes.base}/{r.full_name}/commit/{c.sha}",
            **self._git_fields(r, c),
            "parents": [
                {"sha": p, "url": f"{api}/git/commits/{p}", "html_url": f"{self.shapes.base}/{r.full_name}/commit/{p}"}
                for p in c.parents
            ],
        }

    def _git_fields(self, r: Repo, c: CommitInfo) -> dict[str, Any]:
        """What a git commit says of itself: who, when, its message and tree; never signed here."""
        api = self._api(r)
        return {
            "author": {"name": c.author_name, "email": c.author_email, "date": git_date(c.author_date)},
            "committer": {"name": c.committer_name, "email": c.committer_email, "date": git_date(c.committer_date)},
            "message": c.message,
            "tree": {"sha": c.tree_sha, "url": f"{api}/git/trees/{c.tree_sha}"},
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
                "verified_at": None,
            },
        }

    def file(self, r: Repo, sha: str, f: FileChange) -> dict[str, Any]:
        api = self._api(r)
        data: dict[str, Any] = {
            "sha": f.blob_sha or "0" * 40,
            "filename": f.filename,
            "status": f.status,
            "additions": f.additions,
            "deletions": f.deletions,
            "changes": f.changes,
            "blob_url": f"{self.shapes.base}/{r.full_name}/blob/{sha}/{f.filename}",
            "raw_url": f"{self.shapes.base}/{r.full_name}/raw/{sha}/{f.filename}",
            "contents_url": f"{api}/contents/{f.filename}?ref={sha}",
        }
        if f.patch is not None:
            data["patch"] = f.patch
        if f.previous_filename:
            data["previous_filename"] = f.previous_filename
        return data

    def branch(self, r: Repo, name: str, c: CommitInfo) -> dict[str, Any]:
        """GitHub's `branch-with-protection`: its required checks are visible to readers."""
        api = self._api(r)
        rule = r.protections.get(name)
        contexts = list(rule.contexts) if rule is not None else []
        level = "off" if rule is None or not contexts else "everyone" if rule.enforce_admins else "non_admins"
        return {
            "name": name,
            "commit": self.commit(r, c),
            "_links": {"self": f"{api}/branches/{name}", "html": f"{self.shapes.base}/{r.full_name}/tree/{name}"},
            "protected": rule is not None,
            "protection": {
                "enabled": rule is not None,
                "required_status_checks": {
                    "enforcement_level": level,
                    "contexts": contexts,
                    "checks": [{"context": c, "app_id": None} for c in contexts],
                },
            },
            "protection_url": f"{api}/branches/{name}/protection",
        }

    def ref(self, r: Repo, ref: str, sha: str) -> dict[str, Any]:
        api = self._api(r)
        return {
            "ref": ref,
            "node_id": node_id("Ref", f"{r.id}:{ref}"),
            "url": f"{api}/git/{ref}",
            "object": {"type": "commit", "sha": sha, "url": f"{api}/git/commits/{sha}"},
        }

    def content(self, r: Repo, path: str, ref: str, data: bytes, blob_sha: str) -> dict[str, Any]:
        api = self._api(r)
        name = path.rsplit("/", 1)[-1]
        url = f"{api}/contents/{path}?ref={ref}"
        git_url = f"{api}/git/blobs/{blob_sha}"
        html = f"{self.shapes.base}/{r.full_name}/blob/{ref}/{path}"
        return {
            "type": "file",
            "encoding": "base64",
            "size": len(data),
            "name": name,
            "path": path,
            "content": base64.encodebytes(data).decode(),
            "sha": blob_sha,
            "url": url,
            "git_url": git_url,
            "html_url": html,
            "download_url": f"{self.shapes.base}/{r.full_name}/raw/{ref}/{path}",
            "_links": {"git": git_url, "self": url, "html": html},
        }
