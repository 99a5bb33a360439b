"""`github_get_pull`: a pull request as GitHub shows it now, for PullRequestWorkflow's review run.

Its title and body are people's text: sanitized and snapshotted into the blob store (as the
webhook edge does), so the workflow holds a digest and the review goal quotes the text as data.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from shopfloor.activities.github.api import GitHubApi, read_github
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.reconcile import TITLE_CHARS, snapshot
from shopfloor.agents.untrusted_text import sanitize
from shopfloor.blobs import BlobStore
from shopfloor.models.pull_request_review import PullInfo, PullInput


def _read_pull(api: GitHubApi, inp: PullInput) -> dict[str, Any]:
    return api.get(f"/repos/{inp.repo}/pulls/{inp.number}")


class PullRequestActivities:
    def __init__(self, clients: GitHubClients, blobs: BlobStore) -> None:
        self._clients = clients
        self._blobs = blobs

    def all(self) -> list[Any]:
        return [self.get_pull]

    @activity.defn(name="github_get_pull")
    async def get_pull(self, inp: PullInput) -> PullInfo:
        pr = await read_github(self._clients, inp.repo, _read_pull, inp)
        head, base = pr.get("head") or {}, pr.get("base") or {}
        head_repo = (head.get("repo") or {}).get("full_name")
        title, body = str(pr.get("title") or ""), str(pr.get("body") or "")
        return PullInfo(
            number=inp.number,
            state="open" if pr.get("state") == "open" else "closed",
            merged=bool(pr.get("merged")),
            draft=bool(pr.get("draft")),
            author=str((pr.get("user") or {}).get("login") or ""),
            head_sha=str(head.get("sha") or ""),
            head_ref=str(head.get("ref") or ""),
            same_repo=head_repo in (None, inp.repo),
            base_ref=str(base.get("ref") or "main"),
            title=sanitize(title)[:TITLE_CHARS],
            text=await snapshot(self._blobs, title, body),
            html_url=str(pr.get("html_url") or ""),
        )
