"""Where an agent run is: the short environment section of its system prompt (as OpenCode's
`<env>`), and the sandbox facts it is made from (pure: the sandbox_facts activity detects them).

The facts are detected once per run by an activity (activities/sandbox_facts.py) in the sandbox
the agent's commands use, and recorded in history; the workflow renders the section with this
module for each step, from them, the run's repository and model, and the date of workflow time.
The toolchains' versions are command output the repository may influence (a prepared environment
is made by its setup commands): only a version number is kept of each, and every other text is
one line of allowed characters, capped, so nothing detected can read as an instruction.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from shopfloor.models.agent_run import WorkspaceRef

# The toolchains probed, in the order they are shown: name -> the command that prints its version.
TOOLCHAINS: dict[str, str] = {
    "python3": "python3 --version",
    "node": "node --version",
    "npm": "npm --version",
    "git": "git --version",
    "go": "go version",
    "cargo": "cargo --version",
    "rustc": "rustc --version",
}
VERSION_CHARS = 32
OS_CHARS = 80
PATH_CHARS = 200
REPO_CHARS = 140
MODEL_CHARS = 120
TAG = "env"
_VERSION_RE = re.compile(r"\d+(?:\.\d+)+(?:[-+~._]?[0-9A-Za-z]+)*")
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9 ._,:;()/+~@=-]")


class EnvironmentProbe(BaseModel):
    """The sandbox_facts activity's input: the run's workspace, as its commands would see it."""

    workspace: WorkspaceRef
    run_id: str = ""  # keys the worker's checkout and prepared environment, as for a tool call


class SandboxFacts(BaseModel):
    """What the sandbox the agent's commands run in looks like: a few short strings."""

    workdir: str = ""  # where commands start (the checkout's root); "" unknown
    os: str = ""  # "Debian GNU/Linux 12 (bookworm); Linux 6.1.0"
    toolchains: dict[str, str] = Field(default_factory=dict)  # name -> version, in TOOLCHAINS order
    note: str = ""  # why something is missing ("commands cannot run on this worker")


def one_line(text: str, cap: int) -> str:
    """`text` as one line of plain characters: control and format characters (newlines, escape
    sequences, bidi overrides) and angle brackets (no tag can open or close) become spaces, runs
    of spaces one, at most `cap` characters."""
    chars = (" " if ch in "<>" or unicodedata.category(ch).startswith(("C", "Z")) else ch for ch in text)
    flat = " ".join("".join(chars).split())
    return flat if len(flat) <= cap else flat[: cap - 1].rstrip() + "…"


def plain(text: str, cap: int) -> str:
    """One line of a small set of characters (letters, digits, spaces, `._,:;()/+~@=-`): no
    markup, quotes or angle brackets can pass."""
    return one_line(_NOT_ALLOWED.sub(" ", one_line(text, 4 * cap)), cap)


def version_of(output: str) -> str | None:
    """The version number a `--version` command printed ("Python 3.12.3" -> "3.12.3"); None when
    its first line holds none."""
    first = one_line(output.strip().split("\n", 1)[0] if output.strip() else "", 200)
    found = _VERSION_RE.search(first)
    return found.group(0)[:VERSION_CHARS] if found else None


def parse_probe(output: str) -> SandboxFacts:
    """The facts in the probe's output: `name=value` lines (activities/sandbox_facts.py), the
    first of each name counting, names not asked for ignored."""
    values: dict[str, str] = {}
    for line in output.splitlines():
        name, sep, value = line.partition("=")
        name = name.strip()
        if sep and name not in values and (name in TOOLCHAINS or name in ("os", "uname", "cwd")):
            values[name] = value
    toolchains = {}
    for name in TOOLCHAINS:
        version = version_of(values.get(name, ""))
        if version is not None:
            toolchains[name] = version
    os_name = plain(values.get("os", "").strip().strip("\"'"), OS_CHARS // 2)
    kernel = plain(values.get("uname", ""), OS_CHARS // 2)
    return SandboxFacts(
        workdir=one_line(values.get("cwd", ""), PATH_CHARS),
        os="; ".join(p for p in (os_name, kernel) if p),
        toolchains=toolchains,
    )


def render(facts: SandboxFacts | None, *, now: float, repo: str, model: str) -> str:
    """The system prompt's environment section. `now`: epoch seconds of workflow time (the date is
    shown in UTC); `facts` None: not detected (a run recorded before this existed never gets here)."""
    facts = facts or SandboxFacts(note="the sandbox was not inspected")
    date = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d (%A)")
    workdir = one_line(facts.workdir, PATH_CHARS) or "unknown"
    tools = ", ".join(
        f"{name} {plain(version, VERSION_CHARS)}" for name, version in facts.toolchains.items() if name in TOOLCHAINS
    )
    lines = [
        f"Today's date: {date}, UTC",
        f"Repository: {plain(repo, REPO_CHARS)}",
        f"Working directory: {workdir} (the repository's checkout: commands start here, file tools "
        "take paths relative to it)",
        f"OS: {plain(facts.os, OS_CHARS) or 'unknown'}",
        f"Toolchains on PATH: {tools or 'none detected'}",
        f"Model: {plain(model, MODEL_CHARS)}",
    ]
    if facts.note:
        lines.append(f"Note: {plain(facts.note, 120)}")
    body = "\n".join(f"  {line}" for line in lines)
    return f"Here is some useful information about the environment you are running in:\n<{TAG}>\n{body}\n</{TAG}>"
