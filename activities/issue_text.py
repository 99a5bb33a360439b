"""The issue as GitHub shows it now: its text snapshotted for the agents when work starts on it
(`factory_issue_text`), and whether it is still open (`factory_issue_state`).

Work starts when a maintainer asks (`/shopfloor fix`, the trigger label) or the policy allows it;
the text the agents then get is read from GitHub at that moment, never taken from an older event:
a stranger's issue edited between opening and a maintainer's look must be worked on as the
maintainer saw it. The text is stored exactly as the edge stores it (`snapshot_text`: hidden
characters stripped, what the markdown hides set apart), so the digest of unchanged text equals
the edge's and the workflow can tell an edit from a redelivery. `quote` is the same text, capped
as a goal caps it, in a fenced block for the progress comment: nothing in it renders, links or
notifies anyone.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime
from typing import Any, Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.github.api import GitHubApi, read_github
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.agents.untrusted_snapshot import UntrustedText, snapshot_text
from shopfloor.agents.untrusted_text import strip_format_chars
from shopfloor.blobs import BlobStore, put_json
from shopfloor.models import failure_types
from shopfloor.models.inbox import IssueState, IssueText, IssueTextInput, TextSnapshot

PREVIEW_CHARS = 200  # as the edge's snapshots
TITLE_CHARS = 300  # as the goal quotes a title
BODY_CHARS = 6000  # as the goal quotes a body (activities/factory.py)


def _when(raw: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")) if raw else None
    except ValueError:
        return None


def fenced(text: str) -> str:
    """`text` in a fenced code block that no line of it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def quote_for_people(text: UntrustedText) -> str:
    """The title and body as the agents get them (capped alike), inert in a comment."""
    title = strip_format_chars(text.title)[:TITLE_CHARS]
    body = strip_format_chars(text.body)
    cut = (
        f"\n[… cut: the agents get the first {BODY_CHARS:,} of {len(body):,} characters]"
        if len(body) > BODY_CHARS
        else ""
    )
    shown = fenced(f"{title}\n\n{body[:BODY_CHARS]}{cut}".rstrip())
    if text.hidden:
        parts = "1 part" if len(text.hidden) == 1 else f"{len(text.hidden)} parts"
        shown += (
            f"\n\nThe body's markdown also hides {parts} people do not see; the agents get "
            "them quoted apart, labelled as hidden."
        )
    return shown


def read_issue(api: GitHubApi, inp: IssueTextInput) -> dict[str, Any] | None:
    return api.get_or_none(f"/repos/{inp.repo}/issues/{inp.number}")


class IssueTextActivities:
    def __init__(self, blobs: BlobStore, clients: GitHubClients) -> None:
        self._blobs = blobs
        self._clients = clients

    def all(self) -> list[Any]:
        return [self.issue_text, self.issue_state]

    @activity.defn(name="factory_issue_text")
    async def issue_text(self, inp: IssueTextInput) -> IssueText:
        issue = await read_github(self._clients, inp.repo, read_issue, inp)
        if issue is None:
            raise ApplicationError(
                f"{inp.repo}#{inp.number} is not on GitHub any more (deleted, transferred, "
                "or not visible to shopfloor)",
                type=failure_types.GITHUB_NOT_FOUND,
                non_retryable=True,
            )
        # Off the event loop: hostile markdown may take the parser most of a second.
        text = await asyncio.to_thread(snapshot_text, issue.get("title"), issue.get("body"))
        digest = await put_json(self._blobs, text.model_dump())
        return IssueText(
            text=TextSnapshot(digest=digest, preview=text.body[:PREVIEW_CHARS], chars=len(text.body)),
            title=text.title,
            updated_at=_when(issue.get("updated_at")),
            state=str(issue.get("state") or "open"),
            quote=quote_for_people(text) if inp.quote else "",
        )

    @activity.defn(name="factory_issue_state")
    async def issue_state(self, inp: IssueTextInput) -> IssueState:
        issue = await read_github(self._clients, inp.repo, read_issue, inp)
        if issue is None:
            return IssueState(state="missing")
        state: Literal["open", "closed"] = "closed" if issue.get("state") == "closed" else "open"
        return IssueState(
            state=state, state_reason=issue.get("state_reason"), updated_at=_when(issue.get("updated_at"))
        )
