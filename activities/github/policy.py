"""The repository policy, read where only maintainers can change it.

`.github/shopfloor.yml` is read at the head commit of the default branch, never at a PR head or
any ref a contributor controls: a pull request that edits the policy changes nothing until it is
merged. What is wrong with the file (bad YAML, unknown keys, a directory, too big) comes back as
`PolicyLoad.errors` with the safe defaults in force, so the workflow can park and say why;
GitHub being unreachable or refusing still fails the activity, so Temporal retries it.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from shopfloor.activities.github.api import GitHubApi, q
from shopfloor.activities.github.reads import read_file
from shopfloor.agents.policy import PolicyLoad, parse_policy
from shopfloor.models import failure_types
from shopfloor.models.github_ops import ReadFileInput
from shopfloor.models.github_reads import PolicyInput

MAX_POLICY_BYTES = 64_000  # a policy is a screenful; the result travels through history


def load_policy(api: GitHubApi, inp: PolicyInput) -> PolicyLoad:
    branch = api.get(f"/repos/{inp.repo}").get("default_branch") or "main"
    # Pin the commit first: the ref recorded is exactly what was read, and a tag that happens to
    # share the branch's name cannot be read instead.
    head = api.get_or_none(f"/repos/{inp.repo}/branches/{q(branch)}")
    if head is None:  # an empty repository: no file can exist yet
        return PolicyLoad(path=inp.path, ref=branch)
    sha = head["commit"]["sha"]
    try:
        found = read_file(api, ReadFileInput(repo=inp.repo, path=inp.path, ref=sha, max_bytes=MAX_POLICY_BYTES))
    except ApplicationError as exc:
        if exc.type not in (failure_types.GITHUB_NOT_A_FILE, failure_types.GITHUB_FILE_TOO_LARGE):
            raise
        problem = "is too large" if exc.type == failure_types.GITHUB_FILE_TOO_LARGE else "is not a UTF-8 text file"
        return PolicyLoad(
            source="file",
            path=inp.path,
            ref=branch,
            commit=sha,
            errors=[f"`{inp.path}` on `{branch}` {problem} (at most {MAX_POLICY_BYTES:,} bytes of YAML)"],
        )
    if not found.found:
        return PolicyLoad(path=inp.path, ref=branch, commit=sha)
    where = {"path": inp.path, "ref": branch, "commit": sha, "sha": found.sha}
    return parse_policy(found.content).model_copy(update=where)
