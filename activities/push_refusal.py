"""What to tell a maintainer when GitHub refuses a push, from what `git push` printed.

GitHub refuses some pushes whatever the pusher's write access: a GitHub App changing a file under
`.github/workflows/` without the App's `workflows` permission, and a push that a branch protection
rule forbids (`GH006`). git shows GitHub's reasons as `remote:` lines beside `[remote rejected]`.
The progress comment shows a failure's first 300 characters, so each sentence leads with what
happened and what a maintainer can do, before the raw output.
"""

from __future__ import annotations

import re

_WORKFLOW = re.compile(r"create or update workflow `([^`]{1,300})` without `workflows?` (?:permission|scope)")
_PROTECTED = re.compile(r"GH006: Protected branch update failed for (\S{1,300})")


def remote_lines(said: str) -> list[str]:
    """The lines the server sent (`remote: …`), without git's prefix or blank ones."""
    lines = (line.removeprefix("remote:").strip() for line in said.splitlines() if line.startswith("remote:"))
    return [line for line in lines if line]


def push_refusal(repo: str, branch: str, said: str) -> str:
    """One message for a rejected push: GitHub's reason in shopfloor's words, then what git said."""
    remote = remote_lines(said)
    if found := _WORKFLOW.search(said):
        return (
            f"{repo}: GitHub refused the push to {branch!r} because it changes the workflow file "
            f"{found.group(1)!r} and shopfloor's GitHub App lacks the Workflows permission. "
            "A maintainer can make that change by hand, or grant the App Workflows: read & write."
        )
    if found := _PROTECTED.search(said):
        reasons = [r.removeprefix("error:").strip() for r in remote if "GH006" not in r]
        why = f" ({'; '.join(reasons)})" if reasons else ""
        return (
            f"{repo}: GitHub refused the push to {branch!r}: a branch protection rule covers it{why}. "
            f"Let shopfloor's App push to {branch!r}, or narrow the rule."
        )
    detail = "; ".join(remote) if remote else said.strip()
    return f"{repo}: the push to {branch!r} was rejected: {detail}"
