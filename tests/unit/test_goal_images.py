"""The images a goal carries (`factory_goal`): the body's, then those in the writers' feedback a
triage or fix goal quotes, each named by its place and source, at most four in all, the rest in
notes; and none unless the workflow asks (a run recorded before images). Against the GitHub
simulator as the configured GitHub, the activity run as Temporal's ActivityEnvironment runs it."""

from __future__ import annotations

from pathlib import Path

from images import png
from pydantic import SecretStr
from simulator_runs import BOT_TOKEN, SimulatorHandle
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.factory import FactoryActivities
from shopfloor.activities.github.clients import GitHubClients
from shopfloor.agents.untrusted_snapshot import snapshot_text
from shopfloor.blobs import FileBlobStore, digest_of, put_json
from shopfloor.models.factory_run import FeedbackItem, GoalInput, GoalOutput
from shopfloor.settings import Settings


async def render(simulator: SimulatorHandle, tmp_path: Path, body: str, feedback: str, images: bool) -> GoalOutput:
    blobs = FileBlobStore(tmp_path / "blobs")
    clients = GitHubClients(Settings(github_api_url=simulator.api_url, github_token=SecretStr(BOT_TOKEN)))
    issue = await put_json(blobs, snapshot_text("The app crashes", body))
    said = await put_json(blobs, snapshot_text(None, feedback))
    item = FeedbackItem(kind="instructions", author="maria", digest=said)
    inp = GoalInput(kind="fix", repo="acme/shop", number=7, issue_digest=issue, feedback=[item], images=images)
    return await ActivityEnvironment().run(FactoryActivities(blobs, clients).goal, inp)


async def test_the_bodys_images_then_the_feedbacks_at_most_four(simulator: SimulatorHandle, tmp_path: Path):
    uploads = [png(n, n) for n in range(2, 8)]
    urls = [simulator.attach(data) for data in uploads]
    body = " ".join(f"![shot {n}]({url})" for n, url in enumerate(urls[:3], start=1))
    feedback = f"/shopfloor fix also see ![this]({urls[3]}) and ![that]({urls[4]})"
    out = await render(simulator, tmp_path, body, feedback, images=True)

    assert [(i.number, i.source) for i in out.images] == [
        (1, "the body"),
        (2, "the body"),
        (3, "the body"),
        (1, "feedback item 1 (@maria)"),
    ]
    assert [i.digest for i in out.images] == [digest_of(data) for data in uploads[:4]]
    assert "The body's 3 images follow this message, in order" in out.goal
    assert "1 image from the feedback follows this message, after the body's" in out.goal
    assert "[image 2 of feedback item 1 (@maria) was not fetched: only 4 images are fetched]" in out.goal


async def test_a_goal_the_workflow_did_not_ask_images_for_has_none(simulator: SimulatorHandle, tmp_path: Path):
    url = simulator.attach(png())
    out = await render(simulator, tmp_path, f"![shot]({url})", f"/shopfloor fix ![x]({url})", images=False)
    assert out.images == [] and "Images in" not in out.goal
    assert not [r for r in simulator.requests() if r["path"].startswith("/user-attachments/")]
