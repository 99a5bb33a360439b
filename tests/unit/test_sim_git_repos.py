"""The simulator's bare repositories, on real git: creation, refs, diffs, merges and file writes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shopfloor.simulator.git.cmd import run_git
from shopfloor.simulator.git.repos import ZERO_SHA, BareRepo, GitError, MergeConflict

ALICE = ("Alice", "alice@example.com")
BOB = ("Bob", "bob@example.com")


def ls_tree(repo: BareRepo, rev: str, path: str) -> str:
    return run_git(["ls-tree", rev, "--", path], git_dir=repo.path).stdout.decode()


def make_source(root: Path) -> Path:
    (root / "pkg" / "deep").mkdir(parents=True)
    (root / "README.md").write_text("# demo\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "deep" / "mod.py").write_text("VALUE = 1\n")
    run = root / "run.sh"
    run.write_text("#!/bin/sh\necho hi\n")
    run.chmod(run.stat().st_mode | stat.S_IXUSR)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")  # must not be copied
    return root


@pytest.fixture
def repo(tmp_path: Path) -> BareRepo:
    src = tmp_path / "src"
    src.mkdir()
    (src / "app.py").write_text("def greet():\n    return 'hello'\n")
    (src / "notes.txt").write_text("one\ntwo\nthree\n")
    return BareRepo.create(tmp_path / "repos" / "acme" / "app.git", source_dir=src, author=ALICE)


def test_create_from_source_keeps_files_nested_dirs_and_exec_bit(tmp_path: Path) -> None:
    src = make_source(tmp_path / "src")
    repo = BareRepo.create(tmp_path / "r.git", source_dir=src, default_branch="trunk", author=ALICE)
    tip = repo.branches()["trunk"]
    assert list(repo.branches()) == ["trunk"]
    assert repo.read_file("trunk", "pkg/deep/mod.py") == b"VALUE = 1\n"
    assert repo.read_file(tip, "README.md") == b"# demo\n"
    assert repo.read_file(tip, ".git/config") is None
    assert repo.read_file(tip, "pkg") is None  # a directory is not a file
    info = repo.commit(tip)
    assert (info.author_name, info.author_email, info.parents) == ("Alice", "alice@example.com", ())
    assert info.message == "Initial commit"
    assert info.author_date.endswith("Z") and "T" in info.author_date
    assert ls_tree(repo, tip, "run.sh").startswith("100755 blob")
    assert ls_tree(repo, tip, "README.md").startswith("100644 blob")


def test_create_without_source_commits_a_readme(tmp_path: Path) -> None:
    repo = BareRepo.create(tmp_path / "owner" / "empty.git")
    assert repo.read_file("main", "README.md") == b"# empty\n"
    assert repo.default_branch() == "main"


def test_branches_set_delete_and_fast_forward_rule(repo: BareRepo) -> None:
    main = repo.ref_sha("main")
    assert main is not None and repo.branches() == {"main": main}
    first, _ = repo.write_file("feature", "a.txt", b"a\n", message="add a", author=BOB)
    assert repo.commit(first).parents == (main,)
    assert repo.ref_sha("feature") == first
    repo.set_branch("main", first)  # fast-forward
    assert repo.ref_sha("main") == first

    with pytest.raises(GitError, match="Update is not a fast forward"):
        repo.set_branch("main", main)  # a rewind
    assert repo.ref_sha("main") == first
    other = repo.write_file("other", "b.txt", b"b\n", message="add b", author=BOB)[0]
    repo.set_branch("main", main, force=True)
    assert repo.ref_sha("main") == main
    repo.set_branch("main", other, force=True)

    with pytest.raises(GitError):
        repo.set_branch("main", first, force=True, expected_old=main)
    repo.set_branch("main", first, force=True, expected_old=other)
    repo.set_branch("new", first, expected_old=ZERO_SHA)
    assert repo.ref_sha("new") == first
    with pytest.raises(GitError):
        repo.set_branch("main", "1234567" * 5 + "12345")  # no such commit
    with pytest.raises(GitError):
        repo.set_branch("bad..name", first)

    repo.delete_branch("new")
    assert "new" not in repo.branches()
    assert repo.ref_sha("new") is None
    with pytest.raises(GitError, match="does not exist"):
        repo.delete_branch("new")


def test_resolve_branch_tag_short_and_full_sha(repo: BareRepo) -> None:
    main = repo.ref_sha("main")
    assert main is not None
    assert repo.resolve("main") == main
    assert repo.resolve(main) == main
    assert repo.resolve(main[:7]) == main
    assert repo.resolve("nope") is None
    assert repo.resolve("--all") is None
    run_git(["tag", "v1", main], git_dir=repo.path)
    assert repo.resolve("v1") == main
    assert repo.commit_exists(main) and not repo.commit_exists("f" * 40)
    with pytest.raises(GitError):
        repo.commit("f" * 40)


def test_commits_between_and_merge_base(repo: BareRepo) -> None:
    main = repo.ref_sha("main")
    assert main is not None
    c1, _ = repo.write_file("topic", "x.txt", b"1\n", message="first\n\nbody text", author=BOB)
    c2, _ = repo.write_file("topic", "x.txt", b"2\n", message="second", author=BOB)
    commits = repo.commits_between(main, c2)
    assert [c.sha for c in commits] == [c1, c2]
    assert commits[0].message == "first\n\nbody text"
    assert commits[1].parents == (c1,)
    assert commits[1].author_name == "Bob" and commits[1].committer_email == "bob@example.com"
    assert repo.commits_between(c2, main) == []
    assert repo.merge_base(main, c2) == main
    assert repo.is_ancestor(main, c2) and not repo.is_ancestor(c2, main)


def test_changed_files_statuses_counts_and_patches(repo: BareRepo, tmp_path: Path) -> None:
    main = repo.ref_sha("main")
    assert main is not None
    repo.write_file("pr", "app.py", b"def greet():\n    return 'hi there'\n", message="m", author=BOB)
    repo.write_file("pr", "new.txt", b"fresh\nlines\n", message="a", author=BOB)
    # a rename (same content under a new name) and a deletion, done by hand with a scratch index
    head = _commit_tree_change(repo, "pr", remove=["notes.txt"], add={"docs/notes.md": b"one\ntwo\nthree\n"})
    repo.write_file("main", "unrelated.txt", b"base moved on\n", message="base", author=ALICE)
    files = {f.filename: f for f in repo.changed_files("main", head)}
    assert set(files) == {"app.py", "new.txt", "docs/notes.md"}  # base's own change is not in the PR
    app = files["app.py"]
    assert (app.status, app.additions, app.deletions, app.changes) == ("modified", 1, 1, 2)
    assert app.patch is not None and app.patch.startswith("@@ -1,2 +1,2 @@")
    assert "-    return 'hello'" in app.patch and "+    return 'hi there'" in app.patch
    assert app.blob_sha == repo.blob_sha(head, "app.py")
    new = files["new.txt"]
    assert (new.status, new.additions, new.deletions) == ("added", 2, 0)
    assert new.patch == "@@ -0,0 +1,2 @@\n+fresh\n+lines"
    moved = files["docs/notes.md"]
    assert (moved.status, moved.previous_filename, moved.changes, moved.patch) == ("renamed", "notes.txt", 0, None)

    gone = repo.changed_files(main, _commit_tree_change(repo, "del", remove=["app.py"], base=main))
    assert [(f.filename, f.status, f.deletions, f.blob_sha) for f in gone] == [("app.py", "removed", 2, None)]


def _commit_tree_change(
    repo: BareRepo, branch: str, *, remove: list[str], add: dict[str, bytes] | None = None, base: str | None = None
) -> str:
    """A commit on `branch` that removes and adds files at once (write_file sets one file)."""
    parent = base or repo.ref_sha(branch)
    assert parent is not None
    env = {
        "GIT_INDEX_FILE": str(repo.path / "scratch-index"),
        "GIT_AUTHOR_NAME": "Bob",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "Bob",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    run_git(["read-tree", parent], git_dir=repo.path, env=env)
    removals = "".join(f"0 {'0' * 40}\t{path}\n" for path in remove).encode()  # mode 0 drops the entry
    run_git(["update-index", "--index-info"], git_dir=repo.path, env=env, input=removals)
    for path, content in (add or {}).items():
        blob = run_git(["hash-object", "-w", "--stdin"], git_dir=repo.path, input=content).stdout.decode().strip()
        run_git(["update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"], git_dir=repo.path, env=env)
    tree = run_git(["write-tree"], git_dir=repo.path, env=env).stdout.decode().strip()
    sha = run_git(["commit-tree", tree, "-p", parent, "-m", "tree change"], git_dir=repo.path, env=env)
    (repo.path / "scratch-index").unlink()
    new = sha.stdout.decode().strip()
    repo.set_branch(branch, new, force=True)
    return new


def _diverge(repo: BareRepo) -> tuple[str, str]:
    """main and topic each with their own non-conflicting commit; returns (main tip, topic tip)."""
    repo.write_file("topic", "feature.txt", b"feature\n", message="feature 1", author=BOB)
    topic = repo.write_file("topic", "feature2.txt", b"more\n", message="feature 2", author=BOB)[0]
    main = repo.write_file("main", "base.txt", b"base\n", message="base change", author=ALICE)[0]
    return main, topic


def test_merge_commit_has_two_parents_and_both_changes(repo: BareRepo) -> None:
    main, topic = _diverge(repo)
    assert repo.can_merge(main, topic)
    new = repo.merge(
        "main",
        topic,
        method="merge",
        title="Merge pull request #1 from acme/topic",
        message="Add the feature",
        author=ALICE,
    )
    info = repo.commit(new)
    assert info.parents == (main, topic)
    assert info.message == "Merge pull request #1 from acme/topic\n\nAdd the feature"
    assert info.author_name == "Alice"
    assert repo.ref_sha("main") == new
    assert repo.read_file("main", "feature2.txt") == b"more\n" and repo.read_file("main", "base.txt") == b"base\n"


def test_squash_is_one_commit_with_the_combined_change(repo: BareRepo) -> None:
    main, topic = _diverge(repo)
    new = repo.merge(
        "main",
        topic,
        method="squash",
        title="Add feature (#1)",
        message="* feature 1\n* feature 2",
        author=BOB,
        committer=("GitHub", "noreply@github.com"),
    )
    info = repo.commit(new)
    assert info.parents == (main,)
    assert info.message == "Add feature (#1)\n\n* feature 1\n* feature 2"
    assert (info.author_name, info.committer_name) == ("Bob", "GitHub")
    assert repo.read_file(new, "feature.txt") == b"feature\n" and repo.read_file(new, "base.txt") == b"base\n"
    assert repo.ref_sha("main") == new


def test_rebase_replays_each_commit_onto_base(repo: BareRepo) -> None:
    main, topic = _diverge(repo)
    new = repo.merge(
        "main",
        topic,
        method="rebase",
        title="ignored",
        message="",
        author=ALICE,
        committer=("GitHub", "noreply@github.com"),
    )
    replayed = repo.commits_between(main, new)
    assert [c.message for c in replayed] == ["feature 1", "feature 2"]
    assert replayed[0].parents == (main,)
    assert all(c.author_name == "Bob" and c.committer_name == "GitHub" for c in replayed)
    assert topic not in {c.sha for c in replayed}  # new commits, as GitHub makes
    assert repo.read_file("main", "feature2.txt") == b"more\n" and repo.read_file("main", "base.txt") == b"base\n"


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
def test_conflict_raises_and_leaves_base_untouched(repo: BareRepo, method: str) -> None:
    topic = repo.write_file("topic", "app.py", b"def greet():\n    return 'topic'\n", message="t", author=BOB)[0]
    main = repo.write_file("main", "app.py", b"def greet():\n    return 'main'\n", message="m", author=ALICE)[0]
    assert not repo.can_merge(main, topic)
    with pytest.raises(MergeConflict):
        repo.merge("main", topic, method=method, title="x", message="", author=ALICE)  # type: ignore[arg-type]
    assert repo.ref_sha("main") == main
    assert repo.read_file("main", "app.py") == b"def greet():\n    return 'main'\n"


def test_write_file_creates_branch_and_keeps_exec_mode(tmp_path: Path) -> None:
    repo = BareRepo.create(tmp_path / "x.git", source_dir=make_source(tmp_path / "src"))
    main = repo.ref_sha("main")
    sha, blob = repo.write_file("edit", "run.sh", b"#!/bin/sh\necho bye\n", message="bye", author=BOB)
    assert repo.commit(sha).parents == (main,)
    assert repo.blob_sha("edit", "run.sh") == blob
    assert repo.read_file("edit", "run.sh") == b"#!/bin/sh\necho bye\n"
    assert repo.ref_sha("main") == main
    assert ls_tree(repo, sha, "run.sh").startswith("100755")
    sha2, _ = repo.write_file("edit", "docs/new/file.md", b"x", message="new", author=BOB)
    assert repo.commit(sha2).parents == (sha,) and repo.read_file(sha2, "docs/new/file.md") == b"x"
    with pytest.raises(GitError):
        repo.write_file("edit", "../escape", b"x", message="no", author=BOB)


def test_binary_file_has_no_patch(repo: BareRepo) -> None:
    main = repo.ref_sha("main")
    assert main is not None
    head, blob = repo.write_file("bin", "logo.png", bytes(range(256)) * 4, message="logo", author=BOB)
    [change] = repo.changed_files(main, head)
    assert (change.filename, change.status, change.patch, change.changes, change.blob_sha) == (
        "logo.png",
        "added",
        None,
        0,
        blob,
    )


def test_concurrent_writes_to_one_branch_all_land(repo: BareRepo) -> None:
    """Each write reads the tip and moves it: the per-repo lock keeps any write from being lost."""
    main = repo.ref_sha("main")
    assert main is not None
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(
                lambda i: repo.write_file("busy", f"f{i}.txt", b"%d\n" % i, message=f"f{i}", author=BOB), range(12)
            )
        )
    commits = repo.commits_between(main, "busy")
    assert sorted(c.message for c in commits) == sorted(f"f{i}" for i in range(12))
    assert all(repo.read_file("busy", f"f{i}.txt") == b"%d\n" % i for i in range(12))


def test_the_empty_home_is_removed_when_the_process_exits(tmp_path: Path) -> None:
    """Every process that runs git for the simulator makes one; a day of tests left dozens."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    code = "from shopfloor.simulator.git.cmd import empty_home; import os; print(os.path.isdir(empty_home()))"
    env = {**os.environ, "TMPDIR": str(scratch)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
    assert list(scratch.iterdir()) == []
