"""Activity `repo_profile`: what a run learns about its repository before any agent starts — the
test command, the setup plan and the instructions to agents — read from git at the default
branch's head commit (the commit the policy was read at), never from a pull request's head.

The files come straight from this worker's mirror (`git ls-tree`, `git cat-file`; no checkout):
the list of paths and the few files the pure rules read (agents/test_commands.py,
agents/setup_plans.py, agents/repo_instructions.py). The instructions are stored once as a JSON
blob; the profile carries its digest, so workflow history holds a reference, not the texts.
"""

from __future__ import annotations

from typing import Any

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.git_cmd import GitError, WorkspaceError
from shopfloor.activities.git_mirror import Mirror
from shopfloor.activities.git_remote import open_mirror
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.heartbeat import heartbeating
from shopfloor.activities.workspace import Workspaces, portable
from shopfloor.agents import repo_instructions, setup_plans, test_commands
from shopfloor.blobs import BlobStore, put_json
from shopfloor.models import failure_types
from shopfloor.models.github_reads import POLICY_FILE
from shopfloor.models.repo_profile import ProfileInput, RepoProfile, SetupPlan

log = structlog.get_logger(__name__)

MAX_PATHS = 100_000  # paths the rules look at (a monorepo's listing is cut, not refused)
READ_BYTES = 256_000  # a rule file larger than this is read as empty (no real config is)
REGULAR = ("100644", "100755")  # blobs git checks out as files (no symlinks, no submodules)


class RepoProfileActivities:
    def __init__(self, workspaces: Workspaces, clients: GitHubClients, blobs: BlobStore) -> None:
        self._ws = workspaces
        self._clients = clients
        self._blobs = blobs

    def all(self) -> list[Any]:
        return [self.repo_profile]

    @activity.defn(name="repo_profile")
    async def repo_profile(self, inp: ProfileInput) -> RepoProfile:
        """The profile of `inp.workspace.base_sha`: the policy's choices where it made them, the
        rest detected from the files there."""
        try:
            return await heartbeating(self._profile(inp), detail=f"profile of {inp.workspace.repo}")
        except ApplicationError:
            raise
        except GitError as e:  # the network, a server hiccup: worth another attempt
            raise ApplicationError(str(e), type=failure_types.GIT_ERROR) from None
        except WorkspaceError as e:  # no such commit, a ref that cannot be built
            raise ApplicationError(str(e), type=failure_types.WORKSPACE_ERROR, non_retryable=True) from None

    async def _profile(self, inp: ProfileInput) -> RepoProfile:
        clone_url, sha = portable(inp.workspace)
        git = await open_mirror(self._ws, self._clients, inp.workspace.repo, clone_url)
        await git.ensure_commit(sha)
        entries = await _listing(git, sha)
        paths = list(entries)
        wanted = {*test_commands.FILES_READ, *setup_plans.FILES_READ}
        texts = await _read(git, entries, [p for p in wanted if p in entries])
        profile = RepoProfile()
        if inp.test_command:
            profile.test_command, profile.test_command_source = inp.test_command, "policy"
            profile.test_command_reason = f"test_command in {POLICY_FILE}"
        elif (found := test_commands.detect_test_command(paths, texts)) is not None:
            profile.test_command, profile.test_command_source = found.command, "detected"
            profile.test_command_reason = found.reason
        else:
            profile.test_command_reason = "no test command found (pytest, tox, nox, npm, go, cargo, make)"
        if inp.setup is not None:
            profile.setup = SetupPlan(commands=list(inp.setup), source="policy", reason=f"setup: in {POLICY_FILE}")
        else:
            profile.setup = setup_plans.detect_setup(paths, texts)
        root, nested = repo_instructions.instruction_paths(paths)
        big = [p for p in [*root, *nested] if entries[p][1] > repo_instructions.MAX_FILE_BYTES]
        root_texts = await _read(git, entries, [p for p in root if p not in big], limit=None)
        nested_texts = await _read(
            git, entries, [p for p in nested[: repo_instructions.MAX_NESTED_STORED] if p not in big], limit=None
        )
        stored = repo_instructions.collect(
            sha, root_texts, {p: nested_texts[p] for p in nested if p in nested_texts}, big
        )
        if stored is not None:
            profile.instructions = await put_json(self._blobs, stored)
            profile.instruction_files = stored.files()
        log.info(
            "repository profiled",
            repo=inp.workspace.repo,
            commit=sha,
            test_command=profile.test_command,
            test_source=profile.test_command_source,
            setup=profile.setup.source,
            instruction_files=len(profile.instruction_files),
        )
        return profile


async def _listing(git: Mirror, sha: str) -> dict[str, tuple[str, int]]:
    """Every regular file at `sha`: path -> (blob id, size), at most MAX_PATHS."""
    raw = (await git.run("ls-tree", "-r", "-z", "--long", "--full-tree", sha))[1]
    out: dict[str, tuple[str, int]] = {}
    for entry in raw.split(b"\0"):
        meta, _, name = entry.partition(b"\t")
        fields = meta.split()
        if len(fields) != 4 or fields[0].decode() not in REGULAR:
            continue
        path = name.decode("utf-8", "surrogateescape")
        out[path] = (fields[2].decode(), int(fields[3]) if fields[3].isdigit() else 0)
        if len(out) >= MAX_PATHS:
            break
    return out


async def _read(
    git: Mirror, entries: dict[str, tuple[str, int]], paths: list[str], limit: int | None = READ_BYTES
) -> dict[str, str]:
    """The texts of `paths` (UTF-8, undecodable bytes replaced); a file over `limit` reads as ""."""
    texts: dict[str, str] = {}
    for path in paths:
        oid, size = entries[path]
        if limit is not None and size > limit:
            texts[path] = ""
            continue
        data = (await git.run("cat-file", "blob", oid))[1]
        texts[path] = data.decode("utf-8", "replace")
    return texts
