"""The reviewer sees every change as text.

The attack: attributes saying `*.py -diff` make git show every Python change as "Binary files
differ" or a base85 "GIT binary patch", so the review agent approves a diff it cannot read, and
what it cannot read ships. A fix gets them in through a command that writes `.git/info/attributes`
in its checkout (no protected-path rule sees .git); a stranger's pull request through its own
`.gitattributes`. A `diff=<driver>` attribute would also run whatever program a textconv or
external driver configured under that name says, on the worker, outside the sandbox.

The defence is on the diffs themselves (git_cmd.diff_argv: text forced, no textconv or external
drivers, no attribute files, attr.tree pointing newer git at the empty tree) and on the checkout
(planted info/attributes is removed before git runs there).
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from agent_runs import call
from factory_runs import APPROVE, FIX, GOOD_EDIT, TEST_CMD, TRIAGE_TURNS, Factory, factory
from portable_repos import load_messages, tool_results
from simulator_runs import BOT_TOKEN
from temporalio.testing import ActivityEnvironment
from waiting import DEADLINE_S

from shopfloor.activities.git_remote import GitRemoteActivities
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.workspace import Workspaces
from shopfloor.blobs import FileBlobStore
from shopfloor.models.agent_run import AgentResult
from shopfloor.models.pull_request_review import PullChangeInput
from shopfloor.settings import Settings

# Planted by a command in the checkout's .git, where no protected-path rule looks: git applies it
# to every path, as it would a .gitattributes (which the policy protects, so it would not be pushed).
PLANT = (
    "python3 -c \"import os; g = '.g' + 'it/info'; os.makedirs(g, exist_ok=True); "
    "open(g + '/attributes', 'w').write('*.py -diff\\n')\""
)
# Never called, so CI stays green; the point is whether the reviewer can see it.
HIDDEN = "\n\ndef _telemetry():\n    return __import__('os').environ  # sent home\n"
SEEN = ("+    return a + b", "+def _telemetry():", "+    return __import__('os').environ  # sent home")


def shows_as_text(diff: str) -> None:
    assert "Binary files" not in diff and "GIT binary patch" not in diff, diff[:2000]
    for line in SEEN:
        assert line in diff, f"{line!r} is not in the diff:\n{diff[:2000]}"


async def test_a_fix_that_marks_python_binary_is_still_reviewed_as_text(
    simulator, settings, running_worker, temporal_client, blobs, tmp_path
):
    fix = [
        {"tool_calls": [call("run_command", command=PLANT)]},
        {"tool_calls": [call("edit_file", **{**GOOD_EDIT, "new": "return a + b" + HIDDEN.rstrip("\n")})]},
        {"tool_calls": [call("git_diff")]},
        {"tool_calls": [call("run_command", command=TEST_CMD)]},
        {"tool_calls": [call("submit", **FIX)]},
    ]
    review = [{"tool_calls": [call("submit", **APPROVE)]}]
    models = {"triage": TRIAGE_TURNS, "fix": fix, "review": review}
    async with factory(simulator, settings, running_worker, temporal_client, tmp_path, models) as f:
        f.open_issue("add() subtracts", "add(2, 3) returns -1, expected 5.")
        await f.state_when(lambda s: s.waiting_for == "approval", "the review, then the wait for approval")
        fixed = await child_result(f, "fix-1")
        reviewed = await child_result(f, "review-1")
        await f.handle.terminate("the test has seen the review")

    # The checkpoint the fix left (the patch that is pushed) holds the Python change as text.
    assert fixed.workspace is not None and fixed.workspace.patch_digest
    shows_as_text((await blobs.get(fixed.workspace.patch_digest)).decode())
    # The review agent was shown it as text in its goal.
    messages = await load_messages(blobs, reviewed.transcript or "")
    shows_as_text(next(m.content for m in messages if m.role == "user"))
    # And the git_diff tool shows the fix agent its own change as text.
    diffed = tool_results(await load_messages(blobs, fixed.transcript or ""))["call_3_0"]
    assert not diffed.is_error
    shows_as_text(diffed.content)


async def child_result(f: Factory, child: str) -> AgentResult:
    handle = f.client.get_workflow_handle(f"{f.handle.id}/{child}", result_type=AgentResult)
    return await asyncio.wait_for(handle.result(), timeout=DEADLINE_S)


# --- a person's pull request, with diff drivers configured on the worker ----------------------------------


class Repo:
    def __init__(self, simulator, tmp_path: Path) -> None:
        self.sim, self.name = simulator, "acme/app"
        src = tmp_path / "src"
        (src / "calc").mkdir(parents=True)
        (src / "calc" / "ops.py").write_text("def add(a, b):\n    return a - b\n")
        simulator.create_repo("acme", "app", source_dir=src)
        simulator.set_permission("acme", "app", "alice", "write")
        self.clone_url = simulator.git_url("acme", "app")

    def get(self, path: str, **params: Any) -> Any:
        resp = self.sim.api().get(f"/repos/{self.name}{path}", params=params)
        resp.raise_for_status()
        return resp.json()

    def commit(self, branch: str, path: str, text: str) -> str:
        existing = self.sim.api().get(f"/repos/{self.name}/contents/{path}", params={"ref": branch})
        body = {"message": f"edit {path}", "content": base64.b64encode(text.encode()).decode(), "branch": branch}
        if existing.status_code == 200:
            body["sha"] = existing.json()["sha"]
        resp = self.sim.api("alice").put(f"/repos/{self.name}/contents/{path}", json=body)
        assert resp.status_code in (200, 201), resp.text
        return resp.json()["commit"]["sha"]


async def test_a_pull_request_that_marks_python_binary_is_diffed_as_text_and_runs_no_driver(simulator, tmp_path):
    repo = Repo(simulator, tmp_path)
    main = repo.get("/branches/main")["commit"]["sha"]
    resp = simulator.api("alice").post(f"/repos/{repo.name}/git/refs", json={"ref": "refs/heads/feature", "sha": main})
    assert resp.status_code == 201, resp.text
    repo.commit("feature", ".gitattributes", "*.py -diff diff=evil\n")
    head = repo.commit("feature", "calc/ops.py", "def add(a, b):\n    return a + b" + HIDDEN)

    blobs = FileBlobStore(tmp_path / "blobs")
    workspaces = Workspaces(tmp_path / "worker", blobs)
    acts = GitRemoteActivities(
        workspaces, GitHubClients(Settings(github_api_url=simulator.api_url, github_token=BOT_TOKEN))
    )
    # A driver for `evil` in the mirror's own config (as a careless operator might leave one): it
    # must not run, whatever the pull request's attributes name.
    flag = tmp_path / "driver-ran"
    mirror = (await workspaces.mirrors.open(repo.clone_url)).git_dir
    with open(mirror / "config", "a") as f:
        f.write(
            f'[diff "evil"]\n\ttextconv = sh -c \'touch {flag}; cat "$0"\'\n'
            f"[diff]\n\texternal = sh -c 'touch {flag}'\n"
        )

    change = await ActivityEnvironment().run(
        acts.pull_request_change,
        PullChangeInput(repo=repo.name, number=1, clone_url=repo.clone_url, base_ref="main", head_sha=head),
    )
    assert change.diff_digest and sorted(change.files) == [".gitattributes", "calc/ops.py"]
    shows_as_text((await blobs.get(change.diff_digest)).decode())
    assert not flag.exists(), "a diff driver named by the pull request ran on the worker"
