"""Judging one shell command: allow, ask or deny, each with a reason the model can read.

The command is parsed (shell_parse), then every simple command in it is judged, including those
inside $( ), ` `, <( ), ( ) subshells, `bash -c '…'`, `eval`, heredocs and echoed text fed to a
shell, and behind prefixes such as `env X=1`, `timeout 5`, `nice`, `command`, `xargs`. `cd` is
followed, so `cd .. && rm -rf .` is judged as the removal of the workspace's parent it is.
Quoted text handed to a program that does not run it is data: `echo 'git push' > notes.txt` is
allowed, `echo 'git push' | sh` is not.

Judging runs on text the model wrote, so every step is linear in the command's length (or bounded
by a small constant such as MAX_NESTING), and commands longer than MAX_COMMAND_BYTES are refused
before anything else looks at them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from shopfloor.agents.command_rules import (
    DISK_OR_POWER,
    DOWNLOADERS,
    FD_DUP,
    GIT_VALUE_OPTS,
    INTERPRETER,
    MAX_PREFIXES,
    SHELLS,
    WRITE_OPS,
    WRITERS,
    argv_of,
    downloads,
    fork_bomb,
    kills_everything,
    operands,
    prints_environment,
    shell_options,
    skip_options,
)
from shopfloor.agents.path_rules import Decision, credential, cwd_after_cd, removal_problem, show, write_problem
from shopfloor.agents.shell_parse import Command, Script, ShellParseError, Word, parse

Rule = tuple[re.Pattern[str], str]  # a pattern over a command segment, and what it does ("" unknown)

# Under Linux's 128 KiB limit on one argument (the command is bash's -c argument), and far above
# any command a person would type: longer text belongs in a script file.
MAX_COMMAND_BYTES = 64 * 1024
MAX_NESTING = 4  # bash -c inside eval inside ...: deeper is refused
MAX_CWD_CHARS = 4096  # PATH_MAX: a chain of `cd`s leading deeper is refused, not followed
MAX_ASKS_SHOWN = 5  # distinct reasons quoted in one "ask": the reason travels in workflow history
PUSH = "git push is not allowed: shopfloor pushes branches itself at the end of a stage."
_CODE_OPTS = frozenset({"-c", "-m", "-e", "-E", "-r", "-p", "--eval", "--print"})
_FIND_NEUTRAL = frozenset(
    {
        "-delete",
        "-depth",
        "-xdev",
        "-mount",
        "-print",
        "-print0",
        "-maxdepth",
        "-mindepth",
        "-follow",
        "-noleaf",
        "-daystart",
        "-ignore_readdir_race",
        "-exec",
        "-execdir",
        "-ok",
        "-okdir",
    }
)


def too_long(command: str, what: str = "the command") -> str | None:
    """Why `command` is refused for its length alone (None: it is short enough)."""
    if len(command) <= MAX_COMMAND_BYTES // 4:  # no character is more than 4 bytes in UTF-8
        return None
    size = len(command.encode("utf-8", "surrogatepass"))
    if size <= MAX_COMMAND_BYTES:
        return None
    return (
        f"{what} is {size} bytes long; commands are limited to {MAX_COMMAND_BYTES // 1024} KB "
        f"({MAX_COMMAND_BYTES} bytes). Write a script file with write_file and run that instead."
    )


def judge_command(command: str, ask: Sequence[Rule] = (), deny: Sequence[Rule] = ()) -> tuple[Decision, str]:
    """The decision for one run_command call and its reason (empty when allowed)."""
    length = too_long(command)
    if length is not None:
        return "deny", length
    name = fork_bomb(command)
    if name is not None:
        return "deny", f"`{name}` calls itself through a pipe: that is a fork bomb."
    try:
        script = parse(command)
    except ShellParseError as e:
        return "deny", f"could not parse the command: {e}. shopfloor runs only commands it can read; check the quoting."
    judge = _Judge(ask, deny)
    judge.script(script, ".")
    if judge.denials:
        return "deny", judge.denials[0]
    if judge.asks:
        asks = list(dict.fromkeys(judge.asks))
        more = f" (and {len(asks) - MAX_ASKS_SHOWN} more)" if len(asks) > MAX_ASKS_SHOWN else ""
        return "ask", " ".join(asks[:MAX_ASKS_SHOWN]) + more
    return "allow", ""


@dataclass
class _Feed:
    """What flows out of a command into the next one of a pipeline."""

    download: bool = False  # bytes fetched from the network
    text: str | None = None  # literal text (echo, printf, cat <<EOF)


class _Judge:
    def __init__(self, ask: Sequence[Rule], deny: Sequence[Rule]) -> None:
        self.ask_rules, self.deny_rules = ask, deny
        self.denials: list[str] = []
        self.asks: list[str] = []
        self.nesting = 0

    def script(self, script: Script, cwd: str | None) -> str | None:
        """Judge every command of `script` run from `cwd`; returns the directory it ends in."""
        for pipeline in script:
            if self.denials:
                return cwd  # only the first refusal is reported: judging the rest is wasted work
            feed = _Feed()
            after = cwd
            for cmd in pipeline.commands:
                after, feed = self.command(cmd, cwd, feed)
            if len(pipeline.commands) == 1:  # each part of a pipeline runs in a subshell
                cwd = after
        return cwd

    def nested(self, text: str, cwd: str | None, what: str) -> None:
        """Judge text that a shell will run (bash -c, eval, a heredoc or echo fed to sh)."""
        if self.nesting >= MAX_NESTING:
            self.denials.append(f"{what} nests commands too deeply to check.")
            return
        try:
            script = parse(text)
        except ShellParseError as e:
            self.denials.append(f"could not parse the command that {what} runs: {e}.")
            return
        self.nesting += 1
        try:
            self.script(script, cwd)
        finally:
            self.nesting -= 1

    def word(self, w: Word, cwd: str | None) -> None:
        what = credential(w.text)
        if what is not None:
            self.denials.append(f"{show(w.text)} names {what}; agents may not read or touch credentials.")
        for sub in w.subs:
            self.script(sub, cwd)

    def command(self, cmd: Command, cwd: str | None, feed: _Feed) -> tuple[str | None, _Feed]:
        out = _Feed(download=feed.download)
        if cmd.group is not None:
            self.script(cmd.group, cwd)
            out.download = out.download or downloads(cmd.group)
        for w in cmd.words:
            self.word(w, cwd)
        stdin_text: str | None = None
        stdin_subs: list[Script] = []
        for r in cmd.redirects:
            self.word(r.target, cwd)
            for sub in r.body_subs:
                self.script(sub, cwd)
            if r.op in WRITE_OPS or (r.op == ">&" and not FD_DUP.fullmatch(r.target.text)):
                self.write(r.target, cwd)
            elif r.op in ("<<", "<<-"):
                stdin_text = r.body or ""
            elif r.op == "<<<":
                stdin_text = r.target.text
            elif r.op == "<":
                stdin_subs.extend(r.target.subs)
        argv, note = argv_of(cmd.words)
        if note == "run_as":
            self.denials.append(
                f"{show(argv[0].text)} runs commands as another user, which is not allowed; "
                "commands run unprivileged in a sandbox, so work without it."
            )
            return cwd, out
        if note == "env_dump":
            self.denials.append(_env_dump("env"))
        if note == "too_many_prefixes":
            self.denials.append(
                f"{show(' '.join(w.text for w in cmd.words))} runs behind more than {MAX_PREFIXES} "
                "prefixes (env, nice, timeout, ...), too many to check; drop the extra ones."
            )
        if note or not argv:
            return cwd, out
        name = posixpath.basename(argv[0].text)
        args = argv[1:]
        texts = [w.text for w in args]
        self.policy(" ".join([name, *texts]))
        runs_code = name in SHELLS or name == "eval" or bool(INTERPRETER.fullmatch(name))
        fetched = [sub for w in args for sub in w.subs] + stdin_subs
        if runs_code and any(downloads(sub) for sub in fetched):
            self.denials.append(
                f"{show(name + ' ' + ' '.join(texts))} runs code downloaded from the network, "
                "which is not allowed; download to a file and read it first."
            )
        if name in SHELLS:
            self.shell(name, args, cwd, feed, stdin_text)
        elif INTERPRETER.fullmatch(name):
            self.interpreter(name, texts, feed)
        elif name == "eval":
            self.nested(" ".join(texts), cwd, "eval")
        elif name == "watch":
            self.nested(
                " ".join(w.text for w in args[skip_options(args, 0, frozenset({"-n", "--interval"})) :]), cwd, "watch"
            )
        elif name == "git":
            self.git(texts, cwd)
        elif name == "rm":
            self.rm(args, cwd)
        elif name == "find":
            self.find(args, cwd)
        elif name in WRITERS:
            for target in WRITERS[name](args):
                self.write(target, cwd)
        elif name == "dd":
            for t in texts:
                if t.startswith("of="):
                    self.write(Word(t[3:], expanded="$" in t), cwd)
        elif name == "kill" and kills_everything(texts):
            self.denials.append("kill -1 would signal every process, which is never allowed; kill a process by its id.")
        elif name.startswith("mkfs") or name in DISK_OR_POWER:
            self.denials.append(f"{show(name)} formats disks or powers the machine off, which is never allowed.")
        elif prints_environment(name, texts):
            self.denials.append(_env_dump(name))
        elif name in ("cd", "pushd"):
            ops = operands(args)
            cwd = cwd_after_cd(ops[0].text if ops else None, cwd)
            if cwd is not None and len(cwd) > MAX_CWD_CHARS:
                self.denials.append(
                    f"the command changes directory more than {MAX_CWD_CHARS} characters deep, "
                    "too deep to follow; use shorter paths."
                )
                cwd = None
        elif name == "popd":
            cwd = None
        if name in DOWNLOADERS:
            out.download = True
        if name in ("echo", "printf"):
            out.text = " ".join(t for t in texts if t not in ("-n", "-e", "-E"))
            out.text = out.text.replace("\\n", "\n") if name == "printf" else out.text
        elif name == "cat" and stdin_text is not None and not texts:
            out.text = stdin_text
        return cwd, out

    def policy(self, segment: str) -> None:
        for rx, _ in self.deny_rules:
            if rx.search(segment):
                self.denials.append(f"{show(segment)} matches the repository's deny rule {rx.pattern!r}.")
        for rx, why in self.ask_rules:
            if rx.search(segment):
                does = f"it {why}" if why else f"it matches the repository's ask rule {rx.pattern!r}"
                self.asks.append(f"{show(segment)} needs an operator's approval: {does}.")

    def shell(self, name: str, args: list[Word], cwd: str | None, feed: _Feed, stdin_text: str | None) -> None:
        j, command_mode, stdin_mode = shell_options([w.text for w in args])
        if command_mode:
            if j < len(args):
                self.nested(args[j].text, cwd, f"{name} -c")
        elif j >= len(args) or stdin_mode:
            self.stdin_code(name, feed, stdin_text, cwd)

    def stdin_code(self, name: str, feed: _Feed, stdin_text: str | None, cwd: str | None) -> None:
        if feed.download:
            self.denials.append(
                f"piping a download into {name} is not allowed: it runs code nobody has read. "
                "Download to a file and read it first."
            )
        source = feed.text if feed.text is not None else stdin_text
        if source and name in SHELLS:
            self.nested(source, cwd, f"the text fed to {name}")

    def interpreter(self, name: str, texts: list[str], feed: _Feed) -> None:
        if any(t in _CODE_OPTS for t in texts):
            return
        if not [t for t in texts if not t.startswith("-")] or "-" in texts:
            self.stdin_code(name, feed, None, None)

    def git(self, texts: list[str], cwd: str | None) -> None:
        j = 0
        while j < len(texts) and texts[j].startswith("-"):
            if texts[j] == "-c" and j + 1 < len(texts):
                key, _, value = texts[j + 1].partition("=")
                if key.lower().startswith("alias.") and value.startswith("!"):
                    self.nested(value[1:], cwd, "a git alias")
                elif key.lower().startswith("alias.") and re.search(r"\bpush\b", value):
                    self.denials.append(PUSH)
            j += 2 if texts[j] in GIT_VALUE_OPTS else 1
        sub, rest = (texts[j], texts[j + 1 :]) if j < len(texts) else ("", [])
        if sub in ("push", "send-pack") or (sub in ("subtree", "lfs") and "push" in rest):
            self.denials.append(PUSH)
        elif sub == "config" and any(t.lower().startswith("alias.") for t in rest) and any("push" in t for t in rest):
            self.denials.append(PUSH)

    def rm(self, args: list[Word], cwd: str | None) -> None:
        recursive, targets, ended = False, [], False
        for w in args:
            t = w.text
            if not ended and t == "--":
                ended = True
            elif not ended and t.startswith("--"):
                recursive = recursive or t == "--recursive"
                if t == "--no-preserve-root":
                    self.denials.append("rm --no-preserve-root is never allowed.")
            elif not ended and t.startswith("-") and len(t) > 1:
                recursive = recursive or "r" in t or "R" in t
            else:
                targets.append(w)
        for w in targets:
            self.remove_tree(w, cwd) if recursive else self.write(w, cwd)

    def remove_tree(self, w: Word, cwd: str | None) -> None:
        problem = removal_problem(w.text, cwd, expanded=w.expanded)
        if problem is not None:
            (self.denials if problem[0] == "deny" else self.asks).append(problem[1])

    def write(self, w: Word, cwd: str | None) -> None:
        problem = write_problem(w.text, cwd, expanded=w.expanded)
        if problem is not None:
            self.denials.append(problem)

    def find(self, args: list[Word], cwd: str | None) -> None:
        j = 0
        while j < len(args) and args[j].text in ("-H", "-L", "-P"):
            j += 1
        starts: list[Word] = []
        while j < len(args) and not args[j].text.startswith(("-", "(", "!")):
            starts.append(args[j])
            j += 1
        expr = args[j:]
        texts = [w.text for w in expr]
        selective = any(t.startswith("-") and t not in _FIND_NEUTRAL for t in texts)
        deletes, writes = "-delete" in texts, False
        k = 0
        while k < len(texts):
            if texts[k] in ("-exec", "-execdir", "-ok", "-okdir"):
                m = k + 1
                while m < len(texts) and texts[m] not in (";", "+"):
                    m += 1
                inner = expr[k + 1 : m]
                self.command(Command(words=list(inner)), cwd, _Feed())
                program = posixpath.basename(inner[0].text) if inner else ""
                deletes = deletes or program == "rm"
                writes = writes or program in WRITERS
                k = m
            k += 1
        for w in starts or [Word(".")]:
            if deletes and not selective:
                self.remove_tree(w, cwd)
            elif deletes or writes:
                self.write(w, cwd)


def _env_dump(name: str) -> str:
    return (
        f"`{name}` prints the environment, which is not allowed. Commands run with a clean environment; "
        'print one variable with echo "$NAME" if you need it.'
    )
