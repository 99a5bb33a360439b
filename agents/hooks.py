"""Repository hooks around the agents' work (policy `hooks:`): which after-edit hooks an edit
sets off and the command lines they run, what the model reads of a hook, and when the
before-submit hooks must run again.

Pure string work. The hooks themselves run in the sandbox exactly as the agents' commands do
(activities/tools/activities.py: after an edit in edit_file / write_file, the before-submit ones
in the before_submit_hooks activity the loop calls on an accepted submit). Their commands come
from the run's input (the default branch's policy, read when the run started), never from the
workspace the agent changes.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable

from shopfloor.agents.definition import AgentDefinition
from shopfloor.agents.path_glob import first_match
from shopfloor.models.agent_run import CommandHook, WorkspaceRef

AFTER_EDIT = "after-edit"
BEFORE_SUBMIT = "before-submit"


def edited_path(path: str) -> str:
    """An edit tool's path as the globs see it: relative to the root, no `.` or `..` segments."""
    return posixpath.normpath(path.strip()).lstrip("/")


def hook_argument(path: str) -> str:
    """One edited path as a shell word: quoted, and never read as an option (`-x.py` is `./-x.py`)."""
    return shlex.quote(f"./{path}" if path.startswith("-") else path)


def after_edit_commands(hooks: Iterable[CommandHook], paths: Iterable[str]) -> list[tuple[CommandHook, str]]:
    """The after-edit hooks an edit of `paths` sets off, in the policy's order, each with the
    command line it runs: a hook with `files` runs only when an edited path matches one of its
    globs (matched as protected paths are), with the matching paths appended; one without runs as
    written."""
    edited = list(dict.fromkeys(edited_path(p) for p in paths))
    out: list[tuple[CommandHook, str]] = []
    for hook in hooks:
        if hook.files is None:
            out.append((hook, hook.run))
            continue
        matched = [p for p in edited if first_match(hook.files, p) is not None]
        if matched:
            out.append((hook, f"{hook.run} {' '.join(hook_argument(p) for p in matched)}"))
    return out


def hook_report(stage: str, command: str, report: str) -> str:
    """A hook's outcome as the model reads it: which hook, then the command report (exit code, output)."""
    return f"{stage} hook `{command}`: {report}"


def submit_refused(reports: list[str], *, changed: bool) -> str:
    """The error a submit gets when its before-submit hooks failed or changed files."""
    if changed and not reports:
        why = (
            "the repository's before-submit hooks changed files in the workspace (the changes are kept). "
            "Check them with git_diff, run the tests again, and call submit again."
        )
    else:
        why = "the repository's before-submit checks failed. Fix what they report and call submit again."
        if changed:
            why += " They also changed files (the changes are kept): check them with git_diff."
    return "\n\n".join([f"error: submit refused: {why}", *reports])


def checks_submit(agent: AgentDefinition) -> bool:
    """Whether the before-submit hooks gate this agent's submit: one that submits a result and can
    edit, so its workspace is the work handed on (fix, merge). A reviewer's or triager's submit is
    a verdict on work, never held up by the work's lint."""
    return agent.output_model is not None and any(t in agent.tools for t in ("edit_file", "write_file"))


def hooks_key(workspace: WorkspaceRef) -> str | None:
    """What the before-submit hooks' last pass is remembered by: the workspace's exact state.
    None for a checkout used in place (no checkpoint tells its states apart): hooks run on every submit."""
    if workspace.path is not None:
        return None
    return f"{workspace.base_sha}:{workspace.patch_digest or ''}"
