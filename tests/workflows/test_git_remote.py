"""The git remote activities against the GitHub simulator's smart HTTP (real bare repositories).

- A workspace (base + patch from the blob store) is pushed as ONE commit by the bot, built on a
  worker that never saw the workspace; a retry makes the same sha and pushes nothing (the
  delivery log shows one push event).
- A branch a human moved is never overwritten; the default branch and branches outside
  `shopfloor/` are refused before anything is pushed; an empty workspace has nothing to push.
- A push GitHub refuses (an App changing workflows without the permission) says why, first.
- The token reaches git through its environment only: never argv, results or logs.
- update_from_base: a base that moved cleanly → merged, the patch applies on the new tip; a
  conflicting change → the conflicting paths, and a patch holding the conflict markers.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog
from simulator_runs import BOT_TOKEN, SimulatorHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.git_remote import GitRemoteActivities
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.workspace import Workspaces
from shopfloor.blobs import FileBlobStore
from shopfloor.models.agent_run import WorkspaceRef
from shopfloor.models.git_remote import PushInput, PushOutput, UpdateInput
from shopfloor.settings import Settings

REPO = "acme/app"
BRANCH = "shopfloor/issue-1"
CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


class Env:
    def __init__(self, sim: SimulatorHandle, tmp_path: Path) -> None:
        self.sim = sim
        self.blobs = FileBlobStore(tmp_path / "blobs")
        self.editor = Workspaces(tmp_path / "worker-a", self.blobs)  # where the agent edited
        self.clients = GitHubClients(Settings(github_api_url=sim.api_url, github_token=BOT_TOKEN))
        # Another worker: it rebuilds everything from the ref and the shared blob store.
        self.acts = GitRemoteActivities(Workspaces(tmp_path / "worker-b", self.blobs), self.clients)
        self.clone_url = sim.git_url("acme", "app")

    def get(self, path: str, **params: Any) -> Any:
        with self.sim.api() as c:
            resp = c.get(f"/repos/{REPO}{path}", params=params)
            resp.raise_for_status()
            return resp.json()

    def file(self, name: str, ref: str) -> str:
        return base64.b64decode(self.get(f"/contents/{name}", ref=ref)["content"]).decode()

    def branch_sha(self, branch: str) -> str | None:
        with self.sim.api() as c:
            resp = c.get(f"/repos/{REPO}/git/ref/heads/{branch}")
        return resp.json()["object"]["sha"] if resp.status_code == 200 else None

    def human_commit(self, branch: str, name: str, text: str) -> str:
        """alice commits through the contents API (a push by a person, as far as refs go)."""
        body: dict[str, Any] = {
            "message": f"edit {name}",
            "content": base64.b64encode(text.encode()).decode(),
            "branch": branch,
        }
        with self.sim.api("alice") as c:
            existing = c.get(f"/repos/{REPO}/contents/{name}", params={"ref": branch})
            if existing.status_code == 200:
                body["sha"] = existing.json()["sha"]
            c.put(f"/repos/{REPO}/contents/{name}", json=body).raise_for_status()
        sha = self.branch_sha(branch)
        assert sha
        return sha

    async def workspace(self, edits: dict[str, str], run_id: str = "run-1", base: str = "main") -> WorkspaceRef:
        ref = await self.editor.base_ref(REPO, self.clone_url, base)
        path = await self.editor.open(ref, run_id)
        for name, text in edits.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_text(text)
        return await self.editor.checkpoint(ref, run_id)

    def pushes(self, branch: str = BRANCH) -> list[dict[str, Any]]:
        self.sim.wait_idle()
        return [
            d for d in self.sim.deliveries() if d["event"] == "push" and d["payload"]["ref"] == f"refs/heads/{branch}"
        ]


@pytest.fixture
def env(simulator: SimulatorHandle, tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "README.md").write_text("# app\n")
    (src / "calc.py").write_text(CALC)
    simulator.create_repo("acme", "app", source_dir=src)
    simulator.set_permission("acme", "app", "alice", "write")
    with simulator.api() as c:  # a hook, so pushes show in the delivery log (nobody listens)
        c.post(
            f"/repos/{REPO}/hooks",
            json={"config": {"url": "http://127.0.0.1:9/hook", "content_type": "json"}, "events": ["push"]},
        ).raise_for_status()
    e = Env(simulator, tmp_path)
    yield e
    e.clients.close()


async def run(activity: Any, inp: Any) -> Any:
    return await ActivityEnvironment().run(activity, inp)


def push_input(ref: WorkspaceRef, **kw: Any) -> PushInput:
    return PushInput(workspace=ref, branch=BRANCH, message="Fix add\n\nFixes #1", committed_at=WHEN, **kw)


async def refused(activity: Any, inp: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as failure:
        await run(activity, inp)
    assert failure.value.non_retryable
    return failure.value


# --- push --------------------------------------------------------------------------------------


async def test_push_makes_one_bot_commit_and_a_retry_pushes_nothing(env, caplog, monkeypatch):
    ref = await env.workspace({"calc.py": CALC.replace("a - b", "a + b"), "NEW.md": "new\nfile\n"})
    main = env.branch_sha("main")
    argvs: list[tuple[Any, ...]] = []
    envs: list[dict[str, str]] = []
    real_exec = asyncio.create_subprocess_exec

    async def spy(*args: Any, **kw: Any):  # every process the activity starts: argv and environment
        argvs.append(args)
        envs.append(kw.get("env") or {})
        return await real_exec(*args, **kw)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spy)
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logs:
        first = await run(env.acts.push_workspace, push_input(ref))
        again = await run(env.acts.push_workspace, push_input(ref))  # a retry: same input, same commit

    assert first == PushOutput(head_sha=first.head_sha, pushed=True, files_changed=2, additions=3, deletions=1)
    assert again == first.model_copy(update={"pushed": False})
    assert env.branch_sha(BRANCH) == first.head_sha
    assert env.file("calc.py", BRANCH) == CALC.replace("a - b", "a + b") and env.file("NEW.md", BRANCH) == "new\nfile\n"
    commit = env.get(f"/commits/{first.head_sha}")
    assert [p["sha"] for p in commit["parents"]] == [main]  # one commit, on the workspace's base
    assert commit["commit"]["author"]["name"] == "shopfloor[bot]"
    assert commit["commit"]["author"]["email"] == "shopfloor-bot@users.noreply.github.com"
    assert commit["commit"]["committer"]["name"] == "shopfloor[bot]"
    assert commit["commit"]["message"].startswith("Fix add")
    (push,) = env.pushes()  # the retry pushed nothing
    assert push["payload"]["after"] == first.head_sha and push["payload"]["pusher"]["name"] == "shopfloor[bot]"

    # The token went to git in the environment, and nowhere else.
    basic = base64.b64encode(f"x-access-token:{BOT_TOKEN}".encode()).decode()
    assert any(basic in v for e in envs for v in e.values())
    shown = json.dumps([first.model_dump(mode="json"), again.model_dump(mode="json")]) + caplog.text
    shown += json.dumps(logs, default=str) + json.dumps([list(map(str, a)) for a in argvs])
    assert BOT_TOKEN not in shown and basic not in shown
    assert any(e.get("event") == "pushed workspace" for e in logs)


async def test_the_commit_is_a_function_of_the_input(env, tmp_path):
    ref = await env.workspace({"calc.py": CALC.replace("a - b", "a + b")})
    first = await run(env.acts.push_workspace, push_input(ref))
    # A third worker, from scratch, builds the very same commit: the branch is already there.
    other = GitRemoteActivities(Workspaces(tmp_path / "worker-c", env.blobs), env.clients)
    assert await run(other.push_workspace, push_input(ref)) == first.model_copy(update={"pushed": False})
    # A later push (another time) is another commit; it goes on only from where we left the branch.
    later = push_input(ref, expected_remote_sha=first.head_sha).model_copy(
        update={"committed_at": WHEN.replace(hour=9)}
    )
    moved = await run(env.acts.push_workspace, later)
    assert moved.pushed and moved.head_sha != first.head_sha and env.branch_sha(BRANCH) == moved.head_sha


async def test_a_branch_a_human_moved_is_never_overwritten(env):
    ref = await env.workspace({"calc.py": CALC.replace("a - b", "a + b")})
    first = await run(env.acts.push_workspace, push_input(ref))
    human = env.human_commit(BRANCH, "calc.py", "# alice's version\n")
    # The workflow pushes an updated workspace, expecting the branch where it left it.
    ref2 = await env.workspace({"calc.py": CALC.replace("a - b", "a + b"), "NOTES.md": "more\n"}, run_id="run-2")
    failure = await refused(env.acts.push_workspace, push_input(ref2, expected_remote_sha=first.head_sha))
    assert failure.type == "BranchMoved" and "someone else pushed" in failure.message
    assert human[:12] in failure.message
    assert env.branch_sha(BRANCH) == human and env.file("calc.py", BRANCH) == "# alice's version\n"
    # Expecting the branch to be new when it exists is the same mistake.
    assert (await refused(env.acts.push_workspace, push_input(ref2))).type == "BranchMoved"
    assert env.branch_sha(BRANCH) == human


async def test_the_lease_guards_a_push_racing_a_human(env, monkeypatch):
    """alice pushes after the activity looked at the branch and before it pushed."""
    ref = await env.workspace({"calc.py": CALC.replace("a - b", "a + b")})
    real = env.acts._remote_state
    human: list[str] = []

    async def look_then_alice_pushes(git, clone_url, branch):  # type: ignore[no-untyped-def]
        state = await real(git, clone_url, branch)
        human.append(await asyncio.to_thread(env.human_commit, BRANCH, "calc.py", "# alice\n"))
        return state

    monkeypatch.setattr(env.acts, "_remote_state", look_then_alice_pushes)
    failure = await refused(env.acts.push_workspace, push_input(ref))
    assert failure.type == "BranchMoved"
    assert env.branch_sha(BRANCH) == human[0]


async def test_default_and_foreign_branches_are_refused_without_a_push(env):
    ref = await env.workspace({"calc.py": CALC.replace("a - b", "a + b")})
    main = env.branch_sha("main")
    outside = await refused(env.acts.push_workspace, push_input(ref).model_copy(update={"branch": "feature/x"}))
    assert outside.type == "ShopfloorRefused" and "shopfloor/" in outside.message
    # A repository whose default branch is itself under shopfloor/: still never pushed.
    env.sim.create_repo("acme", "odd", source_dir=None, default_branch="shopfloor/main")
    odd_url = env.sim.git_url("acme", "odd")
    odd = WorkspaceRef(repo="acme/odd", clone_url=odd_url, base_sha=ref.base_sha, patch_digest=ref.patch_digest)
    default = await refused(
        env.acts.push_workspace, PushInput(workspace=odd, branch="shopfloor/main", message="x", committed_at=WHEN)
    )
    assert default.type == "ShopfloorRefused" and "default branch" in default.message
    bad = await refused(env.acts.push_workspace, push_input(ref).model_copy(update={"branch": "shopfloor/a..b"}))
    assert bad.type == "ShopfloorRefused"
    assert env.branch_sha("main") == main and env.branch_sha("feature/x") is None and env.pushes("shopfloor/main") == []


async def test_an_empty_workspace_has_nothing_to_push(env):
    clean = await env.editor.base_ref(REPO, env.clone_url, "main")
    assert (await refused(env.acts.push_workspace, push_input(clean))).type == "NothingToPush"
    # Edits that were undone leave no patch either.
    undone = await env.workspace({"calc.py": CALC})
    assert undone.patch_digest is None
    assert (await refused(env.acts.push_workspace, push_input(undone))).type == "NothingToPush"
    assert env.branch_sha(BRANCH) is None and env.pushes() == []


async def test_a_workflow_change_the_app_may_not_push_is_refused_in_plain_words(env):
    """A repository that unprotects `.github` lets a fix touch its CI; GitHub then refuses the
    bot's push (the App has no `workflows` permission), and the refusal says so first."""
    ref = await env.workspace({"calc.py": CALC.replace("a - b", "a + b"), ".github/workflows/ci.yml": "on: push\n"})
    failure = await refused(env.acts.push_workspace, push_input(ref, protected_paths=[]))
    assert failure.type == "PushRejected"
    assert failure.message.startswith(
        "acme/app: GitHub refused the push to 'shopfloor/issue-1' because it changes the workflow file "
        "'.github/workflows/ci.yml' and shopfloor's GitHub App lacks the Workflows permission."
    )
    assert "grant the App Workflows: read & write" in failure.message
    assert env.branch_sha(BRANCH) is None and env.pushes() == []


# --- update from base ------------------------------------------------------------------------------


async def test_update_from_base(env, tmp_path):
    ref = await env.workspace({"calc.py": CALC.replace("a - b", "a + b")})
    same = await run(env.acts.update_from_base, UpdateInput(workspace=ref, base_branch="main"))
    assert (same.status, same.workspace, same.base_sha) == ("up_to_date", ref, ref.base_sha)

    tip = env.human_commit("main", "README.md", "# app\n\nNow with docs.\n")  # main moves, elsewhere
    merged = await run(env.acts.update_from_base, UpdateInput(workspace=ref, base_branch="main"))
    assert (merged.status, merged.base_sha, merged.conflicts) == ("merged", tip, [])
    assert merged.workspace.base_sha == tip and merged.workspace.patch_digest
    again = await run(env.acts.update_from_base, UpdateInput(workspace=ref, base_branch="main"))
    assert again == merged  # deterministic: same inputs, same digest
    # Any worker opens the new ref: the new base's README plus the workspace's fix.
    checkout = await Workspaces(tmp_path / "worker-d", env.blobs).open(merged.workspace, "check")
    assert (checkout / "README.md").read_text() == "# app\n\nNow with docs.\n"
    assert (checkout / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    # And it pushes as one commit on the new tip.
    pushed = await run(env.acts.push_workspace, push_input(merged.workspace))
    assert env.get(f"/commits/{pushed.head_sha}")["parents"][0]["sha"] == tip


async def test_update_from_base_with_conflicts(env, tmp_path):
    ref = await env.workspace({"calc.py": CALC.replace("a - b", "a + b")})
    tip = env.human_commit("main", "calc.py", CALC.replace("a - b", "b + a"))  # the same line, differently
    out = await run(env.acts.update_from_base, UpdateInput(workspace=ref, base_branch="main"))
    assert (out.status, out.conflicts, out.base_sha) == ("conflicts", ["calc.py"], tip)
    assert out == await run(env.acts.update_from_base, UpdateInput(workspace=ref, base_branch="main"))
    checkout = await Workspaces(tmp_path / "worker-d", env.blobs).open(out.workspace, "fixer")
    text = (checkout / "calc.py").read_text()
    assert "<<<<<<<" in text and "=======" in text and ">>>>>>>" in text
    assert "return a + b" in text and "return b + a" in text


async def test_a_github_app_pushes_with_its_installation_token(tmp_path):
    from simulator_runs import app_keys, running_simulator

    private, public = app_keys()
    with running_simulator(tmp_path / "sim", app_id=4242, app_public_keys={4242: public}) as sim:
        src = tmp_path / "src"
        src.mkdir()
        (src / "calc.py").write_text(CALC)
        sim.create_repo("acme", "app", source_dir=src)
        blobs = FileBlobStore(tmp_path / "blobs")
        editor = Workspaces(tmp_path / "a", blobs)
        base = await editor.base_ref(REPO, sim.git_url("acme", "app"), "main")
        (await editor.open(base, "r") / "calc.py").write_text("fixed\n")
        ref = await editor.checkpoint(base, "r")
        clients = GitHubClients(
            Settings(github_api_url=sim.api_url, github_app_id=4242, github_app_private_key=private)
        )
        with structlog.testing.capture_logs() as logs:
            out = await run(
                GitRemoteActivities(Workspaces(tmp_path / "b", blobs), clients).push_workspace, push_input(ref)
            )
        token = clients.git_token(REPO)
        clients.close()
        with sim.api() as c:
            assert c.get(f"/repos/{REPO}/git/ref/heads/{BRANCH}").json()["object"]["sha"] == out.head_sha
    assert out.pushed and token and token.startswith("ghs_")
    assert token not in out.model_dump_json() + json.dumps(logs, default=str)
