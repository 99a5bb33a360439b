"""Permissions: every tool call is classed allow / ask / deny before it runs.

Pure: no I/O, deterministic, safe to call from a workflow. `classify` never raises; a call it
cannot judge is denied with a reason the model can read and act on.

- Read-only tools (read_file, list_dir, glob, grep, git_diff, read_output) are allowed, except on
  credential locations (~/.ssh, private keys, ~/.aws, .netrc, .git-credentials, gh's hosts.yml,
  /etc/shadow, … see path_rules.CREDENTIALS). A `.env` file in the repository is allowed: the
  workspace is a fresh checkout, so a `.env` there was committed and is repository content, and
  the worker's own environment never reaches tools or the sandbox.
- edit_file / write_file are denied for absolute paths, `~` paths, paths escaping with `..`,
  anything inside `.git/`, and paths matching the repository's `protected_paths`; the tools also
  confine paths themselves, so this is defence in depth with a clear reason.
- run_command is judged by command_judge: denied for rm -r of /, ~, the workspace itself or
  anything outside it; sudo/su/doas; a download piped or substituted into a shell; any git push;
  touching credentials; printing the environment; writes outside the workspace and /tmp; mkfs,
  dd to devices, fork bombs, kill -1. Segments matching `ask_commands` (package installs, network
  tools, containers, recursive chmod/chown, …) need an operator's yes; `deny_commands` adds the
  repository's own refusals. Quoted text given to a program that does not run it is data.
- run_tests is allowed when its `args` are plain arguments (no operators, redirections or
  substitutions, which would run more than the tests).
- Sizes come first: a command (or run_tests' arguments) over command_judge.MAX_COMMAND_BYTES and
  a path over MAX_PATH_BYTES are refused before any parser or pattern reads them, so judging
  stays fast whatever the model sends.
- Any other tool name is denied.
"""

from __future__ import annotations

import functools
import posixpath
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from shopfloor.agents.command_judge import Rule, judge_command, too_long
from shopfloor.agents.path_glob import first_match
from shopfloor.agents.path_rules import Decision, credential
from shopfloor.agents.shell_parse import ShellParseError, parse
from shopfloor.agents.tools import TOOLS

__all__ = ["DEFAULT_ASK_COMMANDS", "Decision", "PermissionPolicy", "Verdict", "classify"]

_END = r"(?=\s|$)"  # a word ends here ("apt" must not match "apt-cache")

# Regexes over one command segment: the program's base name and its arguments joined by single
# spaces, after prefixes such as `env X=1`, `timeout 5` or `nice` are taken off. Each says why.
DEFAULT_ASK_COMMANDS: dict[str, str] = {
    rf"^((python|pypy)[0-9.]* -m )?pip[0-9.]* (install|uninstall|download){_END}": "installs Python packages",
    rf"^uv (add|remove|sync|pip (install|uninstall|sync)|tool install){_END}": "installs Python packages",
    rf"^(poetry|pdm|pipenv|conda|mamba|micromamba) (add|install|remove|update|sync|create){_END}": "installs packages",
    rf"^(npm|pnpm|yarn|bun) (install|i|add|ci|update|upgrade|remove|uninstall|link){_END}|^yarn$": "installs JavaScript packages",
    rf"^(npx|bunx|pnpx){_END}|^(pnpm|yarn) dlx{_END}": "downloads and runs a package",
    rf"^(gem|cargo|go) install{_END}|^go get{_END}": "installs packages",
    rf"^(apt|apt-get|aptitude|dpkg|dnf|yum|rpm|apk|pacman|zypper|brew|snap|flatpak){_END}": "changes system packages",
    rf"^(curl|wget|aria2c|http|https|xh|nc|ncat|netcat|socat|ssh|scp|sftp|ftp|telnet){_END}": "reaches the network",
    rf"^(docker|podman|nerdctl|buildah|docker-compose|kubectl|helm){_END}": "controls containers or clusters",
    rf"^(chmod|chown|chgrp) (\S+ )*(-[a-zA-Z]*R[a-zA-Z]*|--recursive){_END}": "changes permissions recursively",
    rf"^(pkill|killall){_END}": "kills processes by name",
    rf"^(crontab|systemctl|service|launchctl){_END}": "changes system services",
}

READ_ONLY = ("read_file", "list_dir", "glob", "grep", "git_diff", "read_output")
MAX_PATH_BYTES = 4096  # Linux's PATH_MAX: no file a tool can open has a longer path
MAX_REASON_CHARS = 2000  # a reason is shown to the model and kept in workflow history


class Verdict(BaseModel):
    decision: Decision
    reason: str = ""


class PermissionPolicy(BaseModel):
    """The repository's permission rules (from its policy file; never from the model)."""

    ask_commands: list[str] = Field(default_factory=lambda: list(DEFAULT_ASK_COMMANDS))
    deny_commands: list[str] = Field(default_factory=list)
    protected_paths: list[str] = Field(default_factory=list)  # globs from the repo root: see path_glob
    code_mode: bool = True  # run_python (the policy's `code_mode`)

    @field_validator("ask_commands", "deny_commands")
    @classmethod
    def _regexes(cls, patterns: list[str]) -> list[str]:
        for p in patterns:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"invalid regular expression {p!r}: {e}") from None
        return patterns


def classify(tool: str, arguments: dict[str, Any], policy: PermissionPolicy | None = None) -> Verdict:
    """Allow, ask or deny one tool call, with a reason the model can read. Never raises."""
    try:
        decision, reason = _classify(tool, arguments, policy or PermissionPolicy())
    except Exception as e:  # a bug here must cost one refused call, not the run
        decision, reason = "deny", f"internal error while checking this call ({type(e).__name__}); try another way."
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 1] + "…"
    return Verdict(decision=decision, reason=reason)


def _classify(tool: str, arguments: dict[str, Any], policy: PermissionPolicy) -> tuple[Decision, str]:
    spec = TOOLS.get(tool)
    if spec is None:
        return "deny", f"there is no tool named {tool!r}; the tools are {', '.join(sorted(TOOLS))}."
    oversized = _oversized(tool, arguments)
    if oversized is not None:
        return "deny", oversized
    try:
        args = spec.args.model_validate(arguments)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(arguments)'}: {err['msg']}" for err in e.errors())
        return "deny", f"invalid arguments for {tool}: {problems}."
    values = args.model_dump()
    if tool in READ_ONLY:
        for key in ("path", "pattern", "glob"):
            value = values.get(key) if tool != "grep" or key != "pattern" else None
            what = credential(value) if isinstance(value, str) else None
            if what is not None:
                return (
                    "deny",
                    f"{tool} of {value!r} is not allowed: it holds {what}, and agents may not read credentials.",
                )
        return "allow", ""
    if tool in ("edit_file", "write_file"):
        return _write(tool, values["path"], policy)
    if tool == "run_command":
        ask, deny = _rules(tuple(policy.ask_commands), tuple(policy.deny_commands))
        return judge_command(values["command"], ask, deny)
    if tool == "run_tests":
        return _test_args(values["args"])
    if tool == "run_python":  # its program's every binding call is judged again, as that tool's call
        if not policy.code_mode:
            return "deny", "run_python is turned off for this repository (`code_mode: false`); call the tools directly."
        return "allow", ""
    if tool == "delegate":  # a read-only subagent under the same rules; its calls are judged as its own
        return "allow", ""
    return "deny", f"there are no permission rules for {tool!r}, so it may not run."


def _oversized(tool: str, arguments: dict[str, Any]) -> str | None:
    """Why a call is refused for the size of its arguments alone (None: they are small enough)."""
    command = arguments.get("command") if tool == "run_command" else None
    if isinstance(command, str):
        return too_long(command)
    extra = arguments.get("args") if tool == "run_tests" else None
    if isinstance(extra, str):
        return too_long(extra, "the run_tests arguments")
    path = arguments.get("path")
    if isinstance(path, str) and len(path) > MAX_PATH_BYTES // 4:
        size = len(path.encode("utf-8", "surrogatepass"))
        if size > MAX_PATH_BYTES:
            return f"the path is {size} bytes long; paths are limited to {MAX_PATH_BYTES} bytes."
    return None


def _write(tool: str, path: str, policy: PermissionPolicy) -> tuple[Decision, str]:
    if not path.strip():
        return "deny", f"{tool} needs a file path; the path is empty."
    if path.startswith("/"):
        return "deny", f"{tool} takes a path relative to the repository root, not the absolute path {path!r}."
    if path.startswith("~"):
        return "deny", f"{tool} may not write to {path!r}: '~' is a home directory, outside the workspace."
    norm = posixpath.normpath(path)
    if norm == ".." or norm.startswith("../"):
        return "deny", f"{tool} may not write to {path!r}: '..' leads outside the workspace."
    if ".git" in norm.lower().split("/"):
        return "deny", f"{tool} may not write to {path!r}: .git is managed by shopfloor; change working-tree files."
    glob = first_match(policy.protected_paths, norm)
    if glob is not None:
        return "deny", f"{path!r} is protected by the repository's policy ({glob!r}); leave it unchanged."
    return "allow", ""


def _test_args(text: str) -> tuple[Decision, str]:
    if not text.strip():
        return "allow", ""
    refuse = (
        "run_tests takes plain arguments for the test command (no ;, |, &&, redirections or $(...)); "
        "use run_command for anything more."
    )
    try:
        script = parse("test-command " + text)  # as appended to the command: a leading ';' counts
    except ShellParseError as e:
        return "deny", f"could not parse the run_tests arguments: {e}."
    if len(script) != 1 or len(script[0].commands) != 1:
        return "deny", refuse
    cmd = script[0].commands[0]
    if cmd.redirects or cmd.group is not None or any(w.subs or w.expanded for w in cmd.words):
        return "deny", refuse
    return "allow", ""


@functools.lru_cache(maxsize=64)
def _rules(ask: tuple[str, ...], deny: tuple[str, ...]) -> tuple[list[Rule], list[Rule]]:
    return (
        [(re.compile(p), DEFAULT_ASK_COMMANDS.get(p, "")) for p in ask],
        [(re.compile(p), "") for p in deny],
    )
