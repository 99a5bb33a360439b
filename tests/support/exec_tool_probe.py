"""Runs one exec tool call (run_command or run_tests) the way a worker does, in this process with
its own environment: settings from the environment, activities from the worker's composition
root (`activities_for`), the activity run by Temporal's ActivityEnvironment. Prints the result as
JSON, with the full output read back from the blob store.

    python -m tests.support.exec_tool_probe TOOL WORKSPACE ARGUMENTS_JSON

The security tests start it with a PATH that has no bubblewrap: a worker deployed that way.
"""

from __future__ import annotations

import asyncio
import json
import sys

from temporalio.testing import ActivityEnvironment

from shopfloor.blobs import FileBlobStore, put_json
from shopfloor.models.agent_run import ToolInput, WorkspaceRef
from shopfloor.models.transcript import Message, ToolCall
from shopfloor.settings import Settings
from shopfloor.worker import ProviderCache, activities_for


async def main(tool: str, workspace: str, arguments: dict) -> None:
    settings = Settings()
    blobs = FileBlobStore(settings.data_dir / "blobs")
    activity = next(
        a
        for a in activities_for(settings, blobs, ProviderCache(settings).get)
        if getattr(a, "__temporal_activity_definition").name == tool
    )
    reply = Message(role="assistant", tool_calls=[ToolCall(id="call-1", name=tool, arguments=arguments)])
    inp = ToolInput(
        workspace=WorkspaceRef(repo="local/probe", path=workspace),
        reply_digest=await put_json(blobs, reply),
        call_id="call-1",
        name=tool,
        run_id="probe",
    )
    result = await ActivityEnvironment().run(activity, inp)
    output = (await blobs.get(result.output_digest)).decode() if result.output_digest else ""
    print(json.dumps({"ok": result.ok, "warning": result.warning, "output": output}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
