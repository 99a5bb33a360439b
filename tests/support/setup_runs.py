"""The setup activity and the tool activities as one worker runs them, over a blob store that
several such workers share: for tests of prepared environments (tests/workflows,
tests/security)."""

from __future__ import annotations

from pathlib import Path

from portable_repos import make_repo
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.environment import DEFAULT_MAX_ENVIRONMENT_BYTES, Environments
from shopfloor.activities.sandbox import SandboxMode
from shopfloor.activities.sandbox_network import SandboxNetwork
from shopfloor.activities.tools.activities import ToolActivities
from shopfloor.activities.workspace import Workspaces
from shopfloor.activities.workspace_setup import WorkspaceSetupActivities
from shopfloor.blobs import FileBlobStore, put_json
from shopfloor.models.agent_run import ToolInput, WorkspaceRef
from shopfloor.models.repo_profile import SetupInput, SetupOutput
from shopfloor.models.transcript import Message, ToolCall
from shopfloor.settings import Settings


class Worker:
    """One worker's setup and tool activities over a shared blob store."""

    def __init__(
        self,
        root: Path,
        blobs: FileBlobStore,
        settings: Settings,
        mirrors: list[str],
        *,
        sandbox: SandboxMode = "bwrap",
        max_bytes: int = DEFAULT_MAX_ENVIRONMENT_BYTES,
    ) -> None:
        self.blobs = blobs
        workspaces = Workspaces(root / "workspaces", blobs)
        environments = Environments(workspaces.root, blobs, max_bytes=max_bytes)
        network = SandboxNetwork.from_settings(settings.model_copy(update={"sandbox_mirrors": mirrors}))
        self.setup = WorkspaceSetupActivities(workspaces, environments, sandbox=sandbox, network=network)
        self.tools = ToolActivities(blobs, workspaces, sandbox=sandbox, network=network, environments=environments)

    async def prepare(self, inp: SetupInput) -> SetupOutput:
        return await ActivityEnvironment().run(self.setup.workspace_setup, inp)

    async def run(self, ws: WorkspaceRef, command: str, run_id: str) -> tuple[bool, str]:
        reply = Message(
            role="assistant", tool_calls=[ToolCall(id="c1", name="run_command", arguments={"command": command})]
        )
        inp = ToolInput(
            workspace=ws,
            reply_digest=await put_json(self.blobs, reply),
            call_id="c1",
            name="run_command",
            run_id=run_id,
        )
        result = await ActivityEnvironment().run(self.tools.run_command, inp)
        return result.ok, (await self.blobs.get(result.output_digest)).decode()


def base(tmp_path: Path, files: dict[str, str]) -> WorkspaceRef:
    repo = tmp_path / "repo"
    sha = make_repo(repo, files)
    return WorkspaceRef(repo="acme/app", clone_url=str(repo), base_sha=sha)
