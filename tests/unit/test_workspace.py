"""Workspaces on real git repositories made in tmp_path.

Each `Workspaces` instance with its own root plays one worker: the only thing two of them share
is the blob store, as on machines that share no disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from shopfloor.activities.tools.editing import edit_file, write_file
from shopfloor.activities.workspace import (
    STATE_FILE,
    CheckpointTooLarge,
    GitError,
    PatchError,
    WorkspaceError,
    Workspaces,
)
from shopfloor.agents.tools import EditFileArgs, WriteFileArgs
from shopfloor.blobs import FileBlobStore
from shopfloor.errors import ToolError
from shopfloor.models.agent_run import WorkspaceRef

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add, mul\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    done = subprocess.run(["git", *ident, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.rstrip()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A repository with two commits on main and one more on a branch `feature`."""
    src = tmp_path / "source"
    src.mkdir()
    git(src, "init", "-q")
    (src / "README.md").write_text("# demo\n")
    (src / "old.txt").write_text("to be deleted\n")
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / ".gitignore").write_text("*.marker\n__pycache__/\n.pytest_cache/\n")
    git(src, "add", ".")
    git(src, "commit", "-qm", "one")
    (src / "calc.py").write_text(CALC)
    (src / "test_calc.py").write_text(TESTS)
    git(src, "add", ".")
    git(src, "commit", "-qm", "two")
    git(src, "checkout", "-qb", "feature")
    (src / "feature.txt").write_text("feature\n")
    git(src, "add", ".")
    git(src, "commit", "-qm", "three")
    git(src, "checkout", "-q", "main")
    return src


@pytest.fixture
def blobs(tmp_path: Path) -> FileBlobStore:
    return FileBlobStore(tmp_path / "blobs")


@pytest.fixture
def worker_a(tmp_path: Path, blobs: FileBlobStore) -> Workspaces:
    return Workspaces(tmp_path / "worker-a", blobs)


@pytest.fixture
def worker_b(tmp_path: Path, blobs: FileBlobStore) -> Workspaces:
    return Workspaces(tmp_path / "worker-b", blobs)


def snapshot(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file outside .git: its bytes and whether it is executable."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = Path(dirpath, name)
            out[str(path.relative_to(root))] = (path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR))
    return out


def record_git(ws: Workspaces) -> list[list[str]]:
    """Log the argv of every git command this worker runs (its one runner starts them all)."""
    calls: list[list[str]] = []
    run, to_file = ws.runner.run, ws.runner.to_file

    async def spy_run(args: list[str], **kw):  # type: ignore[no-untyped-def]
        calls.append(args)
        return await run(args, **kw)

    async def spy_to_file(args: list[str], **kw):  # type: ignore[no-untyped-def]
        calls.append(args)
        return await to_file(args, **kw)

    ws.runner.run = spy_run  # type: ignore[method-assign]
    ws.runner.to_file = spy_to_file  # type: ignore[method-assign]
    return calls


async def test_base_ref_resolves_head_branch_and_sha(worker_a: Workspaces, source: Path) -> None:
    head = await worker_a.base_ref("o/demo", str(source))
    assert head == WorkspaceRef(repo="o/demo", clone_url=str(source), base_sha=git(source, "rev-parse", "main"))
    feature = await worker_a.base_ref("o/demo", str(source), "feature")
    assert feature.base_sha == git(source, "rev-parse", "feature")
    first = git(source, "rev-parse", "main~1")
    assert (await worker_a.base_ref("o/demo", str(source), first)).base_sha == first
    with pytest.raises(GitError, match="no-such-branch"):
        await worker_a.base_ref("o/demo", str(source), "no-such-branch")
    with pytest.raises(WorkspaceError):
        await worker_a.base_ref("o/demo", "--upload-pack=evil", "main")
    # Nothing about the remote (let alone a credential) is stored in the mirror's config.
    (mirror,) = (worker_a.root / "mirrors").glob("*.git")
    assert "url" not in (mirror / "config").read_text()


async def test_open_gives_the_base_state(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source), "feature")
    path = await worker_a.open(ref, "run-1")
    assert path.parent == worker_a.root / "runs"
    assert set(snapshot(path)) == {
        "README.md",
        "old.txt",
        "run.sh",
        ".gitignore",
        "calc.py",
        "test_calc.py",
        "feature.txt",
    }
    assert (path / "calc.py").read_text() == CALC


async def test_a_second_worker_rebuilds_every_kind_of_change(
    worker_a: Workspaces, worker_b: Workspaces, blobs: FileBlobStore, source: Path
) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    edit_file(path, EditFileArgs(path="calc.py", old="return a - b", new="return a + b"))
    write_file(path, WriteFileArgs(path="pkg/deep/new.py", content="NEW = 1\n"))
    (path / "old.txt").unlink()
    (path / "logo.png").write_bytes(bytes(range(256)) * 4)
    os.chmod(path / "run.sh", 0o755)
    (path / "ignored.marker").write_text("not part of the patch\n")
    (path / "alias.py").symlink_to("calc.py")
    new = await worker_a.checkpoint(ref, "run-1")

    assert new.model_dump(exclude={"patch_digest"}) == ref.model_dump(exclude={"patch_digest"})
    patch = (await blobs.get(new.patch_digest or "")).decode("utf-8", "surrogateescape")
    assert "new file mode 100644" in patch and "deleted file mode" in patch
    assert "old mode 100644\nnew mode 100755" in patch and "ignored.marker" not in patch
    # Every file is diffed as text, a binary one too: what the reviewer is shown is what is pushed.
    assert "GIT binary patch" not in patch and "+++ b/logo.png" in patch

    rebuilt = await worker_b.open(new, "run-1")
    assert rebuilt != path and not str(rebuilt).startswith(str(worker_a.root))
    expected = snapshot(path)
    del expected["ignored.marker"]
    assert snapshot(rebuilt) == expected
    assert os.readlink(rebuilt / "alias.py") == "calc.py"
    # A rebuilt checkout looks like the original one to git: changes unstaged, new files untracked.
    status = git(rebuilt, "status", "--porcelain")
    assert " M calc.py" in status and " D old.txt" in status and "?? logo.png" in status
    assert (await worker_b.checkpoint(new, "run-1")).patch_digest == new.patch_digest


async def test_checkpoint_without_changes_has_no_patch(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    assert (await worker_a.checkpoint(ref, "run-1")).patch_digest is None
    (path / "README.md").write_text("changed\n")
    changed = await worker_a.checkpoint(ref, "run-1")
    (path / "README.md").write_text("# demo\n")  # changed back: no patch again
    assert changed.patch_digest is not None
    assert (await worker_a.checkpoint(changed, "run-1")).patch_digest is None


async def test_reopening_on_the_same_worker_reuses_the_checkout(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    (path / "README.md").write_text("edited\n")
    ref = await worker_a.checkpoint(ref, "run-1")
    (path / "still-here.marker").write_text("a reset (git clean -x) would remove this\n")
    calls = record_git(worker_a)
    assert await worker_a.open(ref, "run-1", read_only=True) == path
    assert await worker_a.open(ref, "run-1") == path
    assert calls == []  # no git command at all: the recorded state matched the ref
    assert (path / "still-here.marker").exists() and (path / "README.md").read_text() == "edited\n"


async def test_a_step_that_died_before_its_checkpoint_is_undone(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    edit_file(path, EditFileArgs(path="calc.py", old="return a - b", new="return a + b"))
    ref1 = await worker_a.checkpoint(ref, "run-1")
    committed = snapshot(path)

    fix_mul = EditFileArgs(
        path="calc.py", old="def mul(a, b):\n    return a + b", new="def mul(a, b):\n    return a * b"
    )
    await worker_a.open(ref1, "run-1")  # the next mutating step starts ...
    edit_file(path, fix_mul)
    (path / "half-written.py").write_text("x = ")
    (path / "README.md").unlink()  # ... and its worker dies before the checkpoint

    assert await worker_a.open(ref1, "run-1") == path  # the retry, on the same worker
    assert snapshot(path) == committed
    # The retried step edits what the ref says, so its edit applies once, not twice.
    edit_file(path, fix_mul)


async def test_concurrent_runs_from_one_mirror(worker_a: Workspaces, source: Path) -> None:
    main, feature = git(source, "rev-parse", "main"), git(source, "rev-parse", "feature")
    refs = [WorkspaceRef(repo="o/demo", clone_url=str(source), base_sha=sha) for sha in (main, feature)]
    one, two = await asyncio.gather(worker_a.open(refs[0], "run-1"), worker_a.open(refs[1], "run-2"))
    assert one != two
    assert not (one / "feature.txt").exists() and (two / "feature.txt").read_text() == "feature\n"
    assert len(list((worker_a.root / "mirrors").glob("*.git"))) == 1


async def test_concurrent_opens_of_one_run_agree(tmp_path: Path, blobs: FileBlobStore, source: Path) -> None:
    """Two processes' worth of Workspaces on one root (the flock), and two coroutines each."""
    one, two = Workspaces(tmp_path / "shared", blobs), Workspaces(tmp_path / "shared", blobs)
    ref = await one.base_ref("o/demo", str(source))
    path = await one.open(ref, "run-1")
    (path / "calc.py").write_text("changed\n")
    ref = await one.checkpoint(ref, "run-1")
    (path / "calc.py").write_text("not checkpointed\n")
    await one.open(ref, "run-1")  # dirty now: every open below must reset, one at a time
    paths = await asyncio.gather(*(ws.open(ref, "run-1", read_only=True) for ws in (one, two, one, two)))
    assert set(paths) == {path} and (path / "calc.py").read_text() == "changed\n"


async def test_a_clone_url_may_hold_spaces(worker_a: Workspaces, source: Path, tmp_path: Path) -> None:
    spaced = source.rename(tmp_path / "my source")
    ref = await worker_a.base_ref("o/demo", str(spaced), "main")
    assert (await worker_a.open(ref, "run-1") / "calc.py").read_text() == CALC
    with pytest.raises(WorkspaceError, match="ref 'main branch' is not usable"):
        await worker_a.base_ref("o/demo", str(spaced), "main branch")


async def test_the_cached_mirror_is_reused(worker_a: Workspaces, source: Path, tmp_path: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    await worker_a.open(ref, "run-1")
    source.rename(tmp_path / "moved-away")  # the remote is gone: only the mirror can serve
    calls = record_git(worker_a)
    path = await worker_a.open(ref, "run-2")
    assert (path / "calc.py").read_text() == CALC
    assert not any("fetch" in argv for argv in calls)


async def test_diff_shows_changes_and_new_files(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    assert await worker_a.diff(ref, "run-1") == f"no changes against the starting commit {ref.base_sha[:12]}"
    (path / "src").mkdir()
    (path / "src" / "fresh.py").write_text("FRESH = True\n")
    (path / "README.md").write_text("# demo\nmore\n")
    text = await worker_a.diff(ref, "run-1")
    assert "diff --git a/src/fresh.py b/src/fresh.py\nnew file mode 100644" in text
    assert "+FRESH = True" in text and "+more" in text
    only = await worker_a.diff(ref, "run-1", "src")
    assert "fresh.py" in only and "README" not in only
    assert "no changes in 'calc.py'" in await worker_a.diff(ref, "run-1", "calc.py")
    with pytest.raises(ToolError, match="outside the workspace"):
        await worker_a.diff(ref, "run-1", "../..")


async def test_bad_patches_raise_clear_errors(worker_a: Workspaces, blobs: FileBlobStore, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    missing = ref.model_copy(update={"patch_digest": "0" * 64})
    with pytest.raises(PatchError, match="cannot load workspace patch '0000"):
        await worker_a.open(missing, "run-1")
    with pytest.raises(PatchError, match="cannot load workspace patch"):
        await worker_a.open(ref.model_copy(update={"patch_digest": "../../etc/passwd"}), "run-1")
    bad = await blobs.put(b"diff --git a/nope.txt b/nope.txt\n--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-x\n+y\n")
    with pytest.raises(PatchError, match=f"patch {bad} does not apply to {ref.base_sha}.*nope.txt"):
        await worker_a.open(ref.model_copy(update={"patch_digest": bad}), "run-1")
    # The failed open left nothing that a later open could mistake for a good state.
    assert await worker_a.open(ref, "run-1")
    assert (worker_a.root / "runs").exists()


async def test_checkpoint_and_diff_need_an_opened_checkout(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    with pytest.raises(WorkspaceError, match="open\\(\\) it first"):
        await worker_a.checkpoint(ref, "never-opened")
    with pytest.raises(WorkspaceError, match="not portable"):
        await worker_a.open(WorkspaceRef(repo="local/x", path="/tmp"), "run-1")


async def test_a_broken_checkout_is_recloned_and_cleanup_removes_it(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    shutil.rmtree(path / ".git")  # an agent's `rm -rf .git`
    (path / ".git").write_text("gitdir: /somewhere/else\n")
    path = await worker_a.open(ref, "run-1")
    assert (path / ".git" / STATE_FILE).is_file() and (path / "calc.py").read_text() == CALC
    worker_a.cleanup("run-1")
    assert not path.exists()


async def test_eol_attributes_round_trip_byte_for_byte(
    worker_a: Workspaces, worker_b: Workspaces, source: Path
) -> None:
    (source / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (source / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    git(source, "add", ".")
    git(source, "commit", "-qm", "crlf")
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    assert (path / "win.txt").read_bytes() == b"one\r\ntwo\r\n"
    edit_file(path, EditFileArgs(path="win.txt", old="two\n", new="2\nthree\n"))
    assert (path / "win.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"
    new = await worker_a.checkpoint(ref, "run-1")
    rebuilt = await worker_b.open(new, "run-1")
    assert (rebuilt / "win.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"


async def test_a_killed_worker_s_run_is_finished_by_another(
    worker_a: Workspaces, worker_b: Workspaces, source: Path
) -> None:
    """A crashed worker's run carried on elsewhere, in miniature: three checkpointed edits on
    worker A, a fourth lost with it, then worker B carries on from the last ref and the
    repository's tests pass."""
    ref = await worker_a.base_ref("o/demo", str(source))
    steps = [
        ("calc.py", "return a - b", "return a + b"),
        ("calc.py", "return a + b\n\n\ndef mul", "return a + b\n\n\n# multiplication\ndef mul"),
        ("README.md", "# demo\n", "# demo\n\nNow with working arithmetic.\n"),
    ]
    for file, old, new in steps:
        path = await worker_a.open(ref, "agent-run")
        edit_file(path, EditFileArgs(path=file, old=old, new=new))
        ref = await worker_a.checkpoint(ref, "agent-run")
    path = await worker_a.open(ref, "agent-run")
    fix_mul = EditFileArgs(
        path="calc.py", old="def mul(a, b):\n    return a + b", new="def mul(a, b):\n    return a * b"
    )
    edit_file(path, fix_mul)
    # SIGKILL here: worker A is gone with its disk, and this fourth edit was never checkpointed.

    path = await worker_b.open(ref, "agent-run")
    assert "Now with working arithmetic." in (path / "README.md").read_text()
    assert "# multiplication" in (path / "calc.py").read_text()
    edit_file(path, fix_mul)  # the retried fourth step applies cleanly: it was not half-kept
    ref = await worker_b.checkpoint(ref, "agent-run")
    assert ref.patch_digest is not None
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"],
        cwd=path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert "2 passed" in done.stdout, done.stdout + done.stderr


async def test_a_hanging_git_is_killed_at_its_timeout(worker_a: Workspaces, tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(GitError, match="timed out after"):
        await worker_a.runner.run(["-c", "alias.nap=!sleep 30", "nap"], cwd=tmp_path, timeout=0.3)
    assert loop.time() - started < 10


# --- size caps and diffs as text ------------------------------------------------------------------


async def test_a_change_over_the_cap_is_refused_and_undone(tmp_path: Path, blobs: FileBlobStore, source: Path) -> None:
    small = Workspaces(tmp_path / "small", blobs, max_checkpoint_bytes=64 * 1024)
    ref = await small.base_ref("o/demo", str(source))
    path = await small.open(ref, "run-1")
    (path / "README.md").write_text("kept\n")
    kept = await small.checkpoint(ref, "run-1")

    path = await small.open(kept, "run-1")
    (path / "calc.py").write_text("lost with the rest of the call\n")
    (path / "data").mkdir()
    (path / "data" / "big.bin").write_bytes(b"x" * 200_000)
    with pytest.raises(CheckpointTooLarge, match=r"at most 64\.0 KB.*'data/big\.bin' \(195\.3 KB\)") as refused:
        await small.checkpoint(kept, "run-1")
    assert refused.value.files == ["data/big.bin", "calc.py"]  # the largest first
    # The checkout is the last checkpoint again, trusted as such, and takes the next change.
    assert not (path / "data").exists() and (path / "calc.py").read_text() == CALC
    assert (path / "README.md").read_text() == "kept\n"
    assert json.loads((path / ".git" / STATE_FILE).read_text()) == {
        "base_sha": kept.base_sha,
        "patch_digest": kept.patch_digest,
        "dirty": False,
    }
    (path / "calc.py").write_text("a small change\n")
    assert (await small.checkpoint(kept, "run-1")).patch_digest not in (None, kept.patch_digest)
    assert max(p.stat().st_size for p in blobs.root.rglob("*") if p.is_file()) < 64 * 1024


async def test_changes_past_the_cap_are_refused_by_their_sizes_or_their_patch(
    tmp_path: Path, blobs: FileBlobStore, source: Path
) -> None:
    small = Workspaces(tmp_path / "small", blobs, max_checkpoint_bytes=64 * 1024)
    ref = await small.base_ref("o/demo", str(source))
    path = await small.open(ref, "run-1")
    (path / "README.md").write_text("line\n" * 20_000)  # a tracked file grown to 100 KB
    with pytest.raises(CheckpointTooLarge, match=r"'README\.md' \(97\.7 KB\)"):
        await small.checkpoint(ref, "run-1")
    assert (path / "README.md").read_text() == "# demo\n"
    # New files that each fit but not together: refused before git reads them.
    path = await small.open(ref, "run-1")
    for i in range(40):
        (path / f"part{i:02}.txt").write_bytes(b"y" * 2000)
    with pytest.raises(CheckpointTooLarge, match=r"holds 78\.1 KB of new or changed files; the largest: 'part39"):
        await small.checkpoint(ref, "run-1")
    # Half of them fit; the other half, added later, fits by itself but makes the patch too large.
    path = await small.open(ref, "run-1")
    for i in range(20):
        (path / f"part{i:02}.txt").write_bytes(b"y" * 2000)
    half = await small.checkpoint(ref, "run-1")
    path = await small.open(half, "run-1")
    for i in range(20):
        (path / f"more{i:02}.txt").write_bytes(b"z" * 2000)
    with pytest.raises(CheckpointTooLarge, match=r"holds 78\.1 KB"):
        await small.checkpoint(half, "run-1")
    assert sorted(p.name for p in path.glob("*.txt")) == ["old.txt", *(f"part{i:02}.txt" for i in range(20))]


async def test_diffs_are_text_whatever_the_change_s_attributes_say(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    (path / ".gitattributes").write_text("*.py -diff\n* binary\n")
    (path / ".git" / "info").mkdir(exist_ok=True)
    (path / ".git" / "info" / "attributes").write_text("* -diff\n")  # planted by a command
    edit_file(path, EditFileArgs(path="calc.py", old="return a - b", new="return a + b  # reviewed?"))
    new = await worker_a.checkpoint(ref, "run-1")

    patch = (await worker_a.blobs.get(new.patch_digest or "")).decode()
    assert "+    return a + b  # reviewed?" in patch and "Binary files" not in patch and "GIT binary" not in patch
    assert not (path / ".git" / "info" / "attributes").exists()
    shown = await worker_a.diff(new, "run-1")
    assert "+    return a + b  # reviewed?" in shown and "Binary files" not in shown


async def test_the_diff_tool_shows_at_most_its_cap(worker_a: Workspaces, source: Path) -> None:
    ref = await worker_a.base_ref("o/demo", str(source))
    path = await worker_a.open(ref, "run-1")
    (path / "big.txt").write_text("a line of text\n" * 150_000)  # 2.2 MB
    (path / "README.md").write_text("small\n")
    ref = await worker_a.checkpoint(ref, "run-1")
    whole = await worker_a.diff(ref, "run-1")
    assert len(whole.encode()) < 1024 * 1024 + 200 and whole.endswith("to see one file's diff]")
    assert "+small" in await worker_a.diff(ref, "run-1", "README.md")
