"""Activity `repo_profile` on a real git repository: what it reads at the given commit (and what it
does not read), the policy's choices over detection, and the instructions blob."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.repo_profile import RepoProfileActivities
from shopfloor.activities.workspace import Workspaces
from shopfloor.agents.repo_instructions import RepoInstructions
from shopfloor.blobs import FileBlobStore, get_json
from shopfloor.models.agent_run import WorkspaceRef
from shopfloor.models.repo_profile import ProfileInput, RepoProfile
from shopfloor.settings import Settings


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    done = subprocess.run(["git", *args], cwd=cwd, env={**env, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str = "c") -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def env(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    blobs = FileBlobStore(tmp_path / "blobs")
    acts = RepoProfileActivities(Workspaces(tmp_path / "worker", blobs), GitHubClients(Settings()), blobs)
    return repo, blobs, acts


async def profile(acts: RepoProfileActivities, repo: Path, sha: str, **policy) -> RepoProfile:
    ref = WorkspaceRef(repo="acme/x", clone_url=str(repo), base_sha=sha)
    return await ActivityEnvironment().run(acts.repo_profile, ProfileInput(workspace=ref, **policy))


async def test_detected_at_the_given_commit_and_not_after_it(env):
    repo, blobs, acts = env
    node = '{"scripts": {"test": "node --test"}}'
    first = commit(
        repo,
        {"package.json": node, "package-lock.json": "{}", "AGENTS.md": "Use tabs.\n", "src/AGENTS.md": "src rules\n"},
    )
    later = commit(repo, {"AGENTS.md": "Use spaces.\n", "go.mod": "module x\n", "pnpm-lock.yaml": ""})
    got = await profile(acts, repo, first)
    assert (got.test_command, got.test_command_source) == ("npm test --silent", "detected")
    assert got.test_command_reason == "package.json scripts.test (package-lock.json)"
    assert (got.setup.commands, got.setup.source) == (["npm ci"], "detected")
    assert got.instruction_files == ["AGENTS.md", "src/AGENTS.md"]
    stored = RepoInstructions.model_validate(await get_json(blobs, got.instructions))
    assert (
        stored.commit == first and stored.root[0].text == "Use tabs.\n" and stored.nested["src"].text == "src rules\n"
    )
    assert (await profile(acts, repo, later)).test_command == "pnpm test"


async def test_the_policys_choices_come_first(env):
    repo, _, acts = env
    sha = commit(repo, {"pytest.ini": "", "requirements.txt": "requests\n"})
    got = await profile(acts, repo, sha, test_command="make check", setup=[])
    assert (got.test_command, got.test_command_source) == ("make check", "policy")
    assert got.setup.commands == [] and got.setup.source == "policy"
    got = await profile(acts, repo, sha)
    assert (got.test_command, got.setup.commands) == (
        "python -m pytest -q",
        ["python -m pip install -r requirements.txt"],
    )


async def test_no_instructions_nothing_detected_and_links_are_not_followed(env, tmp_path):
    repo, _, acts = env
    (tmp_path / "secret.md").write_text("not the repository's")
    (repo / "AGENTS.md").symlink_to(tmp_path / "secret.md")
    sha = commit(repo, {"README.md": "hi\n"})
    got = await profile(acts, repo, sha)
    assert (
        got.test_command is None and got.test_command_source == "none" and "no test command" in got.test_command_reason
    )
    assert got.setup.source == "none" and got.instructions is None and got.instruction_files == []


async def test_a_commit_the_repository_does_not_hold_is_a_clear_final_error(env):
    repo, _, acts = env
    commit(repo, {"README.md": "hi\n"})
    with pytest.raises(ApplicationError) as err:
        await profile(acts, repo, "f" * 40)
    assert err.value.non_retryable and "f" * 12 in str(err.value)
