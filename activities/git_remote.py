"""The git remote activities: push a workspace as one commit, and update a workspace from its
base branch. They run in the worker (never in an agent's sandbox), with the worker's own token.

- `git_push_workspace` builds ONE commit on `workspace.base_sha` whose tree is base + patch,
  deterministically (fixed identity, message and dates from the workflow's clock), so a retry
  makes the same sha and finds the branch already there (`pushed=False`). It writes only
  `shopfloor/*` branches and never the default branch (docs/design.md, Trust and safety), and pushes
  with `--force-with-lease=<branch>:<expected sha or nothing>`: a branch someone else moved is never
  overwritten (BranchMoved; the workflow decides what next). Before anything is pushed, every path
  the commit changes against its base (`git diff-tree`: content, mode, type, both sides of a rename)
  is matched against the policy's protected paths; any hit refuses the push (ProtectedPathChanged,
  non-retryable, naming the paths), whatever tool or command made it.
- `git_update_from_base` merges the base branch's tip into base + patch (`git merge-tree`, no
  work tree) and re-expresses the result as a patch against that tip: `merged`, or `conflicts`
  with the conflicting files left holding git's conflict markers for an agent to resolve.
- `git_pull_request_change` brings a pull request's head and base branch into the mirror and
  stores its change (`git diff merge-base..head`, what GitHub's "Files changed" shows) for a
  reviewer: the head by sha, or through `refs/pull/<n>/head` when it lives in a fork.
- `git_protected_changes` lists the protected paths a pull request's head changes against its
  merge base with the base branch (what GitHub would merge): the workflows ask right before
  they merge, and do not merge when there are any.

Everything is built in this worker's mirror of the repository (git_mirror.py), git run as every
worker runs it (git_cmd.py); the token reaches git through the environment only (git_mirror.py)
and is never returned or logged.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from shopfloor.activities.git_cmd import FETCH_TIMEOUT_S, GitError, WorkspaceError, is_full_sha, is_ref_name, redact
from shopfloor.activities.git_mirror import Mirror
from shopfloor.activities.git_plumbing import git_date
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.github.errors import github_failure
from shopfloor.activities.heartbeat import heartbeating
from shopfloor.activities.push_refusal import push_refusal
from shopfloor.activities.workspace import PatchError, Workspaces, portable
from shopfloor.agents.policy import protected_match
from shopfloor.models import failure_types
from shopfloor.models.agent_run import WorkspaceRef
from shopfloor.models.git_remote import (
    ProtectedChange,
    ProtectedCheckInput,
    ProtectedCheckOutput,
    PushInput,
    PushOutput,
    RevertInput,
    UpdateInput,
    UpdateOutput,
)
from shopfloor.models.github_ops import BRANCH_PREFIX
from shopfloor.models.pull_request_review import PullChange, PullChangeInput

log = structlog.get_logger(__name__)

T = TypeVar("T")
# The commit a merge starts from ("base + patch") needs an identity and a date; fixed ones keep
# the merge, and so the conflict markers and the resulting patch, a function of the inputs.
_MERGE_IDENT = ("shopfloor", "shopfloor@localhost", "@0 +0000")
MAX_LISTED_FILES = 200  # a pull request's changed files named to its reviewer
MAX_LISTED = 20  # protected paths named in a refusal; the rest are counted


def _fail(type_: str, message: str, *, retry: bool = False) -> ApplicationError:
    return ApplicationError(message, type=type_, non_retryable=not retry)


async def open_mirror(workspaces: Workspaces, clients: GitHubClients, repo: str, clone_url: str) -> Mirror:
    """This worker's mirror of `clone_url`, its git carrying the repository's token if any."""
    try:
        token = await asyncio.to_thread(clients.git_token, repo) if "/" in repo and _is_http(clone_url) else None
    except ApplicationError:
        raise
    except Exception as exc:  # noqa: BLE001 - mapped like any GitHub failure, never raw
        raise github_failure(exc, f"a token for {repo}", auth_hint=clients.auth_hint) from None
    return await workspaces.mirrors.open(clone_url, token=token)


class GitRemoteActivities:
    def __init__(self, workspaces: Workspaces, clients: GitHubClients) -> None:
        self._ws = workspaces
        self._clients = clients

    @activity.defn(name="git_push_workspace")
    async def push_workspace(self, inp: PushInput) -> PushOutput:
        return await self._guarded(self._push(inp), f"push {inp.workspace.repo} {inp.branch}")

    @activity.defn(name="git_update_from_base")
    async def update_from_base(self, inp: UpdateInput) -> UpdateOutput:
        return await self._guarded(self._update(inp), f"update {inp.workspace.repo} from {inp.base_branch}")

    @activity.defn(name="git_pull_request_change")
    async def pull_request_change(self, inp: PullChangeInput) -> PullChange:
        return await self._guarded(self._pull_change(inp), f"fetch {inp.repo}#{inp.number}")

    @activity.defn(name="git_protected_changes")
    async def protected_changes(self, inp: ProtectedCheckInput) -> ProtectedCheckOutput:
        return await self._guarded(self._protected_check(inp), f"check {inp.repo}#{inp.number} at {inp.head_sha[:12]}")

    @activity.defn(name="git_revert_patch")
    async def revert_patch(self, inp: RevertInput) -> WorkspaceRef:
        """A workspace on `sha` whose patch undoes it (no patch: `sha` changed nothing)."""
        return await self._guarded(self._revert(inp), f"revert {inp.repo} {inp.sha[:12]}")

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.push_workspace,
            self.update_from_base,
            self.pull_request_change,
            self.protected_changes,
            self.revert_patch,
        ]

    async def _revert(self, inp: RevertInput) -> WorkspaceRef:
        git = await self._mirror(inp.repo, inp.clone_url)
        await git.ensure_commit(inp.sha)
        parent = (await git.out("rev-parse", "--verify", f"{inp.sha}^")).strip()
        with tempfile.TemporaryDirectory(dir=self._ws.root, prefix="revert-") as scratch:
            patch = Path(scratch) / "patch"
            size, _ = await git.diff_to_file(patch, "--binary", "--full-index", "--no-renames", inp.sha, parent)
            digest = await self._ws.blobs.put_file(patch) if size else None
        return WorkspaceRef(repo=inp.repo, clone_url=inp.clone_url, base_sha=inp.sha, patch_digest=digest)

    async def _guarded(self, work: Awaitable[T], detail: str) -> T:
        """Heartbeat through fetches and pushes; map failures to what Temporal should do."""
        try:
            return await heartbeating(work, detail=detail)
        except ApplicationError:
            raise
        except PatchError as e:
            raise _fail(failure_types.PATCH_ERROR, str(e)) from None
        except GitError as e:  # the network, a server hiccup: worth another attempt
            raise _fail(failure_types.GIT_ERROR, str(e), retry=True) from None
        except WorkspaceError as e:  # a ref that cannot be built (no such commit, bad fields)
            raise _fail(failure_types.WORKSPACE_ERROR, str(e)) from None

    # --- push ----------------------------------------------------------------------------------------

    async def _push(self, inp: PushInput) -> PushOutput:
        ref, branch = inp.workspace, inp.branch
        clone_url, base = portable(ref)
        if not branch.startswith(BRANCH_PREFIX):
            raise _fail(
                failure_types.SHOPFLOOR_REFUSED,
                f"{ref.repo}: shopfloor only pushes branches under {BRANCH_PREFIX!r}, not {branch!r}",
            )
        if inp.expected_remote_sha is not None and not is_full_sha(inp.expected_remote_sha):
            raise _fail(
                failure_types.WORKSPACE_ERROR,
                f"expected_remote_sha {inp.expected_remote_sha!r} is not a full commit id",
            )
        if not is_ref_name(branch):
            raise _fail(failure_types.SHOPFLOOR_REFUSED, f"{ref.repo}: {branch!r} is not a valid branch name")
        git = await self._mirror(ref.repo, clone_url)
        default, remote_sha = await self._remote_state(git, clone_url, branch)
        if default is None or branch == default:
            why = (
                "is the default branch"
                if default
                else "cannot be checked against the default branch (the remote did not name it)"
            )
            raise _fail(failure_types.SHOPFLOOR_REFUSED, f"{ref.repo}: {branch!r} {why}; shopfloor never pushes there")
        if not ref.patch_digest:
            raise _fail(failure_types.NOTHING_TO_PUSH, f"{ref.repo}: the workspace has no changes against {base[:12]}")

        await git.ensure_commit(base)
        with tempfile.TemporaryDirectory(dir=self._ws.root, prefix="push-") as scratch:
            await self._ws.patch_file(ref.patch_digest, Path(scratch) / "patch")  # streamed, never in memory
            tree = await _tree_with(git, base, Path(scratch) / "patch", Path(scratch))
        if tree == await git.tree_of(base):
            raise _fail(
                failure_types.NOTHING_TO_PUSH, f"{ref.repo}: the workspace's patch changes nothing against {base[:12]}"
            )
        # What the model typed was checked by the tools; this is what would actually be pushed.
        touched = _protected_changes(await git.changed_paths(base, tree), inp.protected_paths)
        if touched:
            log.warning(
                "push refused: protected paths",
                repo=ref.repo,
                branch=branch,
                paths={c.path: c.glob for c in touched[:MAX_LISTED]},
                total=len(touched),
            )
            refusal = _protected_message("the change touches protected paths, so nothing was pushed", touched)
            raise ApplicationError(
                f"{refusal}; the repository's policy (protected_paths) keeps them for maintainers",
                [c.path for c in touched[:MAX_LISTED]],
                type=failure_types.PROTECTED_PATH_CHANGED,
                non_retryable=True,
            )
        head = await git.commit_tree(
            tree, base, inp.message, inp.author_name, inp.author_email, git_date(inp.committed_at)
        )
        files, adds, dels = await git.numstat(base, head)
        out = PushOutput(head_sha=head, pushed=False, files_changed=files, additions=adds, deletions=dels)

        if remote_sha == head:  # a retry after a push whose answer was lost, or a second call
            log.info("branch already at the commit", repo=ref.repo, branch=branch, sha=head)
            return out
        if remote_sha != inp.expected_remote_sha:
            raise _branch_moved(ref.repo, branch, inp.expected_remote_sha, remote_sha)
        lease = f"--force-with-lease=refs/heads/{branch}:{inp.expected_remote_sha or ''}"
        code, stdout, stderr = await git.run(
            "push",
            "--porcelain",
            "--no-verify",
            lease,
            "--",
            clone_url,
            f"{head}:refs/heads/{branch}",
            timeout=FETCH_TIMEOUT_S,
            ok=(0, 1),
        )
        if code != 0:
            said = redact((stdout + stderr).decode("utf-8", "replace"))
            if "stale info" in said:  # moved between our look and our push
                raise _branch_moved(ref.repo, branch, inp.expected_remote_sha, None)
            if "[remote rejected]" in said:  # a protected branch, an App permission: retrying will not help
                log.warning("push rejected by the remote", repo=ref.repo, branch=branch, said=said[-2000:])
                raise _fail(failure_types.PUSH_REJECTED, push_refusal(ref.repo, branch, said))
            raise _fail(failure_types.GIT_ERROR, f"{ref.repo}: pushing {branch!r} failed: {said.strip()}", retry=True)
        log.info("pushed workspace", repo=ref.repo, branch=branch, sha=head, files=files)
        return out.model_copy(update={"pushed": True})

    async def _remote_state(self, git: Mirror, clone_url: str, branch: str) -> tuple[str | None, str | None]:
        """(the default branch, where `branch` is now or None) in one round trip."""
        raw = await git.out(
            "ls-remote", "--symref", "--", clone_url, "HEAD", f"refs/heads/{branch}", timeout=FETCH_TIMEOUT_S
        )
        default = sha = None
        for line in raw.splitlines():
            left, _, name = line.partition("\t")
            if name == "HEAD" and left.startswith("ref: refs/heads/"):
                default = left.removeprefix("ref: refs/heads/")
            elif name == f"refs/heads/{branch}":
                sha = left
        return default, sha

    # --- update from base ------------------------------------------------------------------------------

    async def _update(self, inp: UpdateInput) -> UpdateOutput:
        ref = inp.workspace
        clone_url, base = portable(ref)
        if not is_ref_name(inp.base_branch):
            raise _fail(failure_types.WORKSPACE_ERROR, f"{ref.repo}: {inp.base_branch!r} is not a valid branch name")
        git = await self._mirror(ref.repo, clone_url)
        tip = await git.fetch_ref(f"refs/heads/{inp.base_branch}")
        await git.ensure_commit(base)
        behind, _, _ = await git.run("merge-base", "--is-ancestor", tip, base, ok=(0, 1))
        if behind == 0:  # the tip is the base or one of its ancestors: nothing to take in
            return UpdateOutput(status="up_to_date", workspace=ref, base_sha=tip)

        ours = base
        if ref.patch_digest:
            with tempfile.TemporaryDirectory(dir=self._ws.root, prefix="update-") as scratch:
                await self._ws.patch_file(ref.patch_digest, Path(scratch) / "patch")
                tree = await _tree_with(git, base, Path(scratch) / "patch", Path(scratch))
            ours = await git.commit_tree(tree, base, "workspace", *_MERGE_IDENT)
        # Exit 1 means conflicts: the tree is still written, conflicting files holding markers
        # labelled with the two commit ids (`<<<<<<< <ours>` / `>>>>>>> <tip>`).
        code, raw, _ = await git.run(
            "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours, tip, ok=(0, 1)
        )
        fields = raw.decode("utf-8", "surrogateescape").split("\0")
        merged, conflicts = fields[0].strip(), sorted({f for f in fields[1:] if f})
        with tempfile.TemporaryDirectory(dir=self._ws.root, prefix="update-") as scratch:
            patch = Path(scratch) / "patch"
            size, _ = await git.diff_to_file(patch, "--binary", "--full-index", "--no-renames", tip, merged)
            digest = await self._ws.blobs.put_file(patch) if size else None
        status: Literal["merged", "conflicts"] = "conflicts" if code == 1 else "merged"
        log.info(
            "workspace updated from base",
            repo=ref.repo,
            base_branch=inp.base_branch,
            tip=tip,
            status=status,
            conflicts=len(conflicts),
        )
        new_ref = ref.model_copy(update={"base_sha": tip, "patch_digest": digest, "path": None})
        return UpdateOutput(status=status, workspace=new_ref, base_sha=tip, conflicts=conflicts if code == 1 else [])

    async def _pull_change(self, inp: PullChangeInput) -> PullChange:
        git, clone_url, merge_base = await self._pull_request_in_mirror(
            inp.repo, inp.clone_url, inp.base_ref, inp.head_sha, inp.number
        )
        # For the reviewer to read: as text whatever the pull request's .gitattributes say, and at
        # most a checkpoint's size (a stranger's 300 MB file is cut, not stored).
        cap = self._ws.max_checkpoint_bytes
        with tempfile.TemporaryDirectory(dir=self._ws.root, prefix="change-") as scratch:
            diff, listing = Path(scratch) / "diff", Path(scratch) / "names"
            size, complete = await git.diff_to_file(
                diff, "--full-index", "--no-renames", merge_base, inp.head_sha, limit=cap
            )
            if not complete:
                with open(diff, "ab") as f:
                    f.write(f"\n[… the diff goes on past {cap:,} bytes: read the changed files]\n".encode())
            await git.diff_to_file(
                listing, "--name-only", "--no-renames", "-z", merge_base, inp.head_sha, limit=MAX_LISTED_FILES * 4096
            )
            names = listing.read_bytes().decode("utf-8", "replace").split("\0")
            digest = await self._ws.blobs.put_file(diff) if size else None
        ws = WorkspaceRef(repo=inp.repo, clone_url=clone_url, base_sha=inp.head_sha)
        return PullChange(
            workspace=ws,
            merge_base=merge_base,
            diff_digest=digest,
            diff_bytes=size,
            files=[n for n in names if n][:MAX_LISTED_FILES],
        )

    # --- protected paths before a merge ------------------------------------------------------------

    async def _protected_check(self, inp: ProtectedCheckInput) -> ProtectedCheckOutput:
        """The protected paths a pull request's head changes against its merge base with the base
        branch's tip (what GitHub's merge would take in), read from git, not from the API's
        paged file list."""
        if not is_full_sha(inp.head_sha):
            raise _fail(failure_types.WORKSPACE_ERROR, f"head {inp.head_sha!r} is not a full commit id")
        git, _, merge_base = await self._pull_request_in_mirror(
            inp.repo, inp.clone_url, inp.base_ref, inp.head_sha, inp.number
        )
        touched = _protected_changes(await git.changed_paths(merge_base, inp.head_sha), inp.protected_paths)
        why = "it changes protected paths, which shopfloor never merges by itself (a maintainer may)"
        message = _protected_message(why, touched) if touched else ""
        log.info("protected paths checked", repo=inp.repo, number=inp.number, head=inp.head_sha, touched=len(touched))
        return ProtectedCheckOutput(
            merge_base=merge_base, changes=touched[:MAX_LISTED], total=len(touched), message=message
        )

    async def _pull_request_in_mirror(
        self, repo: str, clone_url: str, base_ref: str, head_sha: str, number: int | None
    ) -> tuple[Mirror, str, str]:
        """(git in the mirror, the portable clone URL, the merge base): a pull request's head and
        its base branch's tip fetched into this worker's mirror, and where the head branched off."""
        clone_url, _ = portable(WorkspaceRef(repo=repo, clone_url=clone_url, base_sha=head_sha))
        if not is_ref_name(base_ref):
            raise _fail(failure_types.WORKSPACE_ERROR, f"{repo}: {base_ref!r} is not a valid branch name")
        git = await self._mirror(repo, clone_url)
        tip = await git.fetch_ref(f"refs/heads/{base_ref}")
        await self._ensure_head(git, repo, head_sha, number)
        code, out, _ = await git.run("merge-base", tip, head_sha, ok=(0, 1))
        merge_base = out.decode().strip() if code == 0 else tip  # unrelated histories: against the tip
        return git, clone_url, merge_base

    # --- mirror and credentials --------------------------------------------------------------------------

    async def _mirror(self, repo: str, clone_url: str) -> Mirror:
        return await open_mirror(self._ws, self._clients, repo, clone_url)

    async def _ensure_head(self, git: Mirror, repo: str, sha: str, number: int | None) -> None:
        """A pull request's head in the mirror: by sha, or through refs/pull/<n>/head (a fork's)."""
        try:
            await git.ensure_commit(sha, fallback=[f"refs/pull/{number}/head"] if number is not None else [])
        except WorkspaceError as e:
            if number is None or isinstance(e, GitError):
                raise
            raise _fail(
                failure_types.WORKSPACE_ERROR,
                f"{repo}#{number}: head {sha[:12]} is not fetchable (pushed over since?)",
                retry=True,
            ) from None


async def _tree_with(git: Mirror, base: str, patch: Path, scratch: Path) -> str:
    try:
        return await git.tree_with_patch(base, patch, scratch)
    except GitError as e:
        raise PatchError(f"the workspace patch does not apply to {base}: {e.stderr}") from None


def _protected_changes(paths: list[str], patterns: list[str] | None) -> list[ProtectedChange]:
    found = ((path, protected_match(path, patterns)) for path in paths)
    return [ProtectedChange(path=path, glob=glob) for path, glob in found if glob is not None]


def _protected_message(why: str, touched: list[ProtectedChange]) -> str:
    """A refusal for the progress comment (which shows its first 300 characters): why, then the paths."""
    named = ", ".join(f"`{c.path}`" for c in touched[:MAX_LISTED])
    more = f" and {len(touched) - MAX_LISTED} more" if len(touched) > MAX_LISTED else ""
    return f"{why}: {named}{more}"


def _branch_moved(repo: str, branch: str, expected: str | None, found: str | None) -> ApplicationError:
    was = f"at {expected[:12]}" if expected else "absent"
    now = f"it is at {found[:12]}" if found else "it changed while pushing"
    return _fail(
        failure_types.BRANCH_MOVED,
        f"{repo}: {branch!r} was expected {was} but {now}: someone else pushed to it; "
        "shopfloor does not overwrite their work",
    )


def _is_http(url: str) -> bool:
    return url.startswith(("http://", "https://"))
