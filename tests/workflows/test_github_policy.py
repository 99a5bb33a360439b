"""The policy and similar-issue reads against the GitHub simulator, over HTTP.

- The policy comes from the default branch's head, even when a PR branch carries another
  `.github/shopfloor.yml` (docs/policy.md); absent -> defaults; invalid -> errors with the defaults.
- Similar issues are found by the words of a title, never include the issue itself or pull
  requests, and a title full of search syntax stays plain words.
- Both are registered on the composition root's worker and survive Temporal's data converter.
"""

from __future__ import annotations

import base64
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from simulator_runs import BOT_TOKEN, SimulatorHandle
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.testing import ActivityEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from shopfloor.activities.github.clients import GitHubClients
from shopfloor.activities.github.operations import GitHubActivities
from shopfloor.agents.policy import PolicyLoad, RepoPolicy
from shopfloor.models.github_reads import PolicyInput, SimilarIssuesInput
from shopfloor.settings import Settings
from shopfloor.worker import ProviderCache, activities_for

REPO = "acme/app"
POLICY = ".github/shopfloor.yml"


def put_file(sim: SimulatorHandle, branch: str, path: str, text: str) -> None:
    """A commit on `branch` through GitHub's contents API (updating the file if it exists)."""
    with sim.api() as c:
        existing = c.get(f"/repos/{REPO}/contents/{path}", params={"ref": branch})
        body = {"message": f"edit {path}", "content": base64.b64encode(text.encode()).decode(), "branch": branch}
        if existing.status_code == 200:
            body["sha"] = existing.json()["sha"]
        c.put(f"/repos/{REPO}/contents/{path}", json=body).raise_for_status()


def make_repo(sim: SimulatorHandle, tmp_path: Path, policy: str | None, default_branch: str = "main") -> str:
    src = tmp_path / "src"
    (src / ".github").mkdir(parents=True)
    (src / "README.md").write_text("# app\n")
    if policy is not None:
        (src / ".github" / "shopfloor.yml").write_text(policy)
    sim.create_repo("acme", "app", source_dir=src, default_branch=default_branch)
    with sim.api() as c:
        return c.get(f"/repos/{REPO}/branches/{default_branch}").json()["commit"]["sha"]


def pr_branch_with(sim: SimulatorHandle, base_sha: str, text: str) -> None:
    """A contributor's branch and PR that rewrite the policy."""
    with sim.api() as c:
        c.post(f"/repos/{REPO}/git/refs", json={"ref": "refs/heads/loosen", "sha": base_sha}).raise_for_status()
    put_file(sim, "loosen", POLICY, text)
    with sim.api() as c:
        c.post(f"/repos/{REPO}/pulls", json={"title": "loosen", "head": "loosen", "base": "main"}).raise_for_status()


@pytest.fixture
def acts(simulator: SimulatorHandle):
    clients = GitHubClients(Settings(github_api_url=simulator.api_url, github_token=BOT_TOKEN))
    yield GitHubActivities(clients)
    clients.close()


async def run(activity: Any, inp: Any) -> Any:
    return await ActivityEnvironment().run(activity, inp)


# --- policy -----------------------------------------------------------------------------------


async def test_policy_comes_from_the_default_branch_not_a_pr_head(simulator, tmp_path, acts):
    main_sha = make_repo(simulator, tmp_path, "auto_fix: never\nmax_review_rounds: 2\n")
    pr_branch_with(simulator, main_sha, "auto_fix: always\nauto_merge: true\nrequire_human_approval: false\n")
    before = len(simulator.requests())
    load = await run(acts.load_policy, PolicyInput(repo=REPO))
    assert load.ok and load.source == "file" and (load.ref, load.commit) == ("main", main_sha)
    assert (load.policy.auto_fix, load.policy.max_review_rounds, load.policy.auto_merge) == ("never", 2, False)
    assert load.policy.require_human_approval is True
    # The contents were asked for at the default branch's commit, never at the PR's head.
    reads = [r for r in simulator.requests()[before:] if "/contents/" in r["path"]]
    assert [r["query"] for r in reads] == [f"ref={main_sha}"]

    # Once the maintainers change the default branch, the next load sees it.
    put_file(simulator, "main", POLICY, "auto_fix: always\n")
    again = await run(acts.load_policy, PolicyInput(repo=REPO))
    assert again.policy.auto_fix == "always" and again.commit != main_sha and again.sha != load.sha


async def test_policy_follows_a_default_branch_not_named_main(simulator, tmp_path, acts):
    make_repo(simulator, tmp_path, "max_review_rounds: 7\n", default_branch="trunk")
    load = await run(acts.load_policy, PolicyInput(repo=REPO))
    assert load.ok and load.ref == "trunk" and load.policy.max_review_rounds == 7


async def test_absent_policy_means_the_defaults(simulator, tmp_path, acts):
    main_sha = make_repo(simulator, tmp_path, None)
    pr_branch_with(simulator, main_sha, "auto_merge: true\n")  # only on the PR: still absent
    load = await run(acts.load_policy, PolicyInput(repo=REPO))
    assert load.ok and load.source == "default" and load.policy == RepoPolicy() and load.sha is None
    assert load.ref == "main" and load.commit == main_sha


async def test_invalid_policy_gives_errors_and_the_safe_defaults(simulator, tmp_path, acts):
    make_repo(simulator, tmp_path, "auto_fix: always\nauto_merg: true\nmax_review_rounds: 50\n")
    load = await run(acts.load_policy, PolicyInput(repo=REPO))
    assert load.source == "file" and load.policy == RepoPolicy() and load.sha
    assert load.errors == [
        "`max_review_rounds`: must be between 1 and 10 (got 50)",
        "unknown key `auto_merg` (did you mean `auto_merge`?)",
    ]


def put_bytes(sim: SimulatorHandle, branch: str, path: str, data: bytes) -> None:
    with sim.api() as c:
        sha = c.get(f"/repos/{REPO}/contents/{path}", params={"ref": branch}).json()["sha"]
        body = {"message": "x", "content": base64.b64encode(data).decode(), "branch": branch, "sha": sha}
        c.put(f"/repos/{REPO}/contents/{path}", json=body).raise_for_status()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"auto_fix: \xff\xfe never\n", "is not a UTF-8 text file"),
        (b"# padding\n" * 7000, "is too large"),
    ],
)
async def test_a_policy_file_that_cannot_be_read_is_reported(simulator, tmp_path, acts, data, problem):
    make_repo(simulator, tmp_path, "auto_fix: always\n")
    put_bytes(simulator, "main", POLICY, data)
    load = await run(acts.load_policy, PolicyInput(repo=REPO))
    assert load.errors == [f"`.github/shopfloor.yml` on `main` {problem} (at most 64,000 bytes of YAML)"]
    assert load.source == "file" and load.policy == RepoPolicy()


# --- similar issues ---------------------------------------------------------------------------


def open_issues(sim: SimulatorHandle, *titles: str, bodies: dict[str, str] | None = None) -> dict[str, int]:
    numbers = {}
    with sim.api("alice") as c:
        for title in titles:
            body = (bodies or {}).get(title, "")
            numbers[title] = c.post(f"/repos/{REPO}/issues", json={"title": title, "body": body}).json()["number"]
    return numbers


# GitHub indexes an issue a while after it changes; these tests are about what is matched.
@pytest.mark.simulator_config(search_index_delay_s=0)
async def test_similar_issues_finds_related_ones_and_not_itself(simulator, tmp_path, acts):
    main_sha = make_repo(simulator, tmp_path, None)
    n = open_issues(
        simulator,
        "Login fails with unicode password",  # the one being triaged
        "Login crashes for unicode usernames",  # shares login + unicode
        "Unicode password rejected at login",  # shares every keyword
        "Dark mode colours",  # unrelated
        "Password reset email missing",  # one keyword only: too weak
        "Session expires",  # related only through its body
        bodies={"Session expires": "after a unicode password login the session expires"},
    )
    with simulator.api() as c:  # a PR with a matching title is not an issue
        c.post(f"/repos/{REPO}/git/refs", json={"ref": "refs/heads/f", "sha": main_sha})
        c.put(f"/repos/{REPO}/contents/x.txt", json={"message": "x", "content": "eA==", "branch": "f"})
        c.post(f"/repos/{REPO}/pulls", json={"title": "Fix login with unicode password", "head": "f", "base": "main"})
    with simulator.api("alice") as c:
        c.patch(f"/repos/{REPO}/issues/{n['Login crashes for unicode usernames']}", json={"state": "closed"})

    me = n["Login fails with unicode password"]
    out = await run(
        acts.similar_issues, SimilarIssuesInput(repo=REPO, number=me, title="Login fails with unicode password")
    )
    assert out.keywords == ["login", "unicode", "password", "fails"]
    found = [i.number for i in out.issues]
    assert me not in found
    assert found[0] == n["Unicode password rejected at login"]  # every keyword beats some
    assert set(found) == {
        n["Unicode password rejected at login"],
        n["Login crashes for unicode usernames"],
        n["Session expires"],
    }
    crash = next(i for i in out.issues if i.number == n["Login crashes for unicode usernames"])
    assert crash.state == "closed" and crash.url.endswith(f"/issues/{crash.number}")
    searches = [r for r in simulator.requests() if r["path"].endswith("/search/issues")]
    assert 1 <= len(searches) <= 3  # bounded: the search API allows 30 a minute

    limited = await run(acts.similar_issues, SimilarIssuesInput(repo=REPO, number=me, title="Login unicode", limit=1))
    assert len(limited.issues) == 1


@pytest.mark.simulator_config(search_index_delay_s=0)
async def test_search_syntax_in_a_title_stays_plain_words(simulator, tmp_path, acts):
    make_repo(simulator, tmp_path, None)
    simulator.create_repo("evil", "other")
    with simulator.api() as c:
        c.post("/repos/evil/other/issues", json={"title": "login unicode"})
    n = open_issues(simulator, 'repo:evil/other "login" OR unicode: is:pr')
    title = 'repo:evil/other "login" OR unicode: is:pr'
    out = await run(acts.similar_issues, SimilarIssuesInput(repo=REPO, number=n[title], title=title))
    assert out.keywords == ["repo", "evil", "other", "login", "unicode", "pr"]  # no qualifier, quote or OR
    assert out.issues == []  # nothing from evil/other, and not itself
    empty = await run(acts.similar_issues, SimilarIssuesInput(repo=REPO, number=1, title="?? the of !!"))
    assert empty.issues == [] and empty.keywords == []


# --- through the composition root's worker ----------------------------------------------------


@workflow.defn(name="PolicyReadTest")
class PolicyReadWorkflow:
    @workflow.run
    async def run(self, repo: str) -> PolicyLoad:
        return await workflow.execute_activity(
            "github_load_policy",
            PolicyInput(repo=repo),
            result_type=PolicyLoad,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=0.5), maximum_attempts=3),
        )


async def test_load_policy_runs_on_the_worker(simulator, tmp_path, temporal_client, settings, blobs):
    make_repo(simulator, tmp_path, "auto_fix: always\nbudgets: {max_steps: {fix: 40}}\n")
    simulator.inject_fault("GET", r"/contents/", 502)  # one retry on the way
    s = settings.model_copy(update={"github_api_url": simulator.api_url, "github_token": BOT_TOKEN})
    s = Settings.model_validate(s.model_dump())  # secrets as SecretStr again
    worker = Worker(
        temporal_client,
        task_queue=s.task_queue,
        workflows=[PolicyReadWorkflow],
        activities=activities_for(s, blobs, ProviderCache(s).get),
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_cached_workflows=0,
    )
    async with worker:
        load = await temporal_client.execute_workflow(
            PolicyReadWorkflow.run, REPO, id=f"policy-{uuid.uuid4().hex[:8]}", task_queue=s.task_queue
        )
    assert isinstance(load, PolicyLoad) and load.ok
    assert load.policy.auto_fix == "always" and load.policy.budgets.max_steps.fix == 40
