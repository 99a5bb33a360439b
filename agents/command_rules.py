"""What the command judge knows about programs: which are shells, wrappers, downloaders, which
arguments of a program it writes, and how to find the program a command line really runs.

Pure tables and helpers over parsed words (shell_parse); the judging itself is command_judge.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator, Sequence

from shopfloor.agents.shell_parse import Script, ShellParseError, Word, parse

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
INTERPRETER = re.compile(r"(python|pypy)[0-9.]*|perl|ruby|node|nodejs|php|deno|lua|Rscript|pwsh|source|\.")
DOWNLOADERS = frozenset({"curl", "wget", "aria2c", "fetch", "http", "https", "xh", "lwp-request"})
RUN_AS = frozenset({"sudo", "sudoedit", "su", "doas", "pkexec", "run0"})
DISK_OR_POWER = frozenset(
    {"mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "gdisk", "parted", "shutdown", "reboot", "halt", "poweroff"}
)
RESERVED = frozenset(
    {
        "{",
        "}",
        "!",
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "do",
        "done",
        "while",
        "until",
        "for",
        "case",
        "esac",
        "function",
        "time",
        "select",
        "coproc",
    }
)
# Prefixes that run the rest of their arguments as a command: (options taking a value, how many
# positional arguments come before the command).
WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    name: (frozenset(values.split()), positional)
    for name, values, positional in [
        ("nice", "-n --adjustment", 0),
        ("timeout", "-s --signal -k --kill-after", 1),
        ("nohup", "", 0),
        ("setsid", "", 0),
        ("stdbuf", "-i -o -e --input --output --error", 0),
        ("ionice", "-c -n -p --class --classdata", 0),
        ("time", "-f -o --format --output", 0),
        ("command", "", 0),
        ("builtin", "", 0),
        ("exec", "-a", 0),
        ("busybox", "", 0),
        (
            "xargs",
            "-I -n -P -L -d -E -s -a --arg-file --max-args --max-procs --delimiter "
            "--replace --max-lines --eof --max-chars",
            0,
        ),
        ("flock", "-w --timeout -E --conflict-exit-code", 1),
        ("chronic", "", 0),
        ("unbuffer", "", 0),
    ]
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
FD_DUP = re.compile(r"[0-9]+-?|-")
WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
GIT_VALUE_OPTS = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--list-cmds"}
)
# A shell function's head, `name() {`. The name must start where a name can start (the
# lookbehind), so a long run of name characters is tried once, not from each of its characters:
# every scan below is linear in the command's length.
_NAME_CHARS = r"[^\s(){};|&<>]"
_FUNCTION_HEAD = re.compile(rf"(?<!{_NAME_CHARS})({_NAME_CHARS}+)\s*\(\s*\)\s*\{{")
_BODY_TOKEN = re.compile(rf"{_NAME_CHARS}+|[|&]")
MAX_PREFIXES = 16  # env, nice, timeout ... before the program: more is refused, not followed


def argv_of(words: list[Word]) -> tuple[list[Word], str | None]:
    """The words that name the program actually run and its arguments, with assignments,
    reserved words and wrapper prefixes taken off; and a note: "run_as", "env_dump",
    "lookup" (command -v), "too_many_prefixes" (more than MAX_PREFIXES to take off) or None."""
    i = 0
    while i < len(words) and (words[i].text in RESERVED or _ASSIGNMENT.match(words[i].text)):
        i += 1
    argv = words[i:]
    steps = 0  # each prefix (and each `env -S` split) copies the words: bounded, so linear
    while argv:
        name = posixpath.basename(argv[0].text)
        if name in RUN_AS:
            return argv, "run_as"
        if name != "env" and name not in WRAPPERS:
            break
        steps += 1
        if steps > MAX_PREFIXES:
            return argv, "too_many_prefixes"
        if name == "env":
            j = 1
            while j < len(argv) and (argv[j].text.startswith("-") or _ASSIGNMENT.match(argv[j].text)):
                if argv[j].text in ("-S", "--split-string") and j + 1 < len(argv):
                    steps += 1
                    if steps > MAX_PREFIXES:
                        return argv, "too_many_prefixes"
                    argv = [*argv[:j], *_split(argv[j + 1].text), *argv[j + 2 :]]  # env -S 'cmd args'
                    continue
                j += 2 if argv[j].text in ("-u", "--unset", "-C", "--chdir") else 1
            if j >= len(argv):
                return argv, "env_dump"
            argv = argv[j:]
        else:
            if name == "command" and len(argv) > 1 and argv[1].text in ("-v", "-V"):
                return argv, "lookup"
            values, positional = WRAPPERS[name]
            argv = argv[skip_options(argv, 1, values) + positional :]
    return argv, None


def _split(text: str) -> list[Word]:
    """The words of `text` as a shell would split them (env -S); unreadable text stays one word."""
    try:
        script = parse(text)
    except ShellParseError:
        return [Word(text)]
    return [w for pipeline in script for cmd in pipeline.commands for w in cmd.words] or [Word(text)]


def skip_options(argv: Sequence[Word], j: int, values: frozenset[str]) -> int:
    while j < len(argv):
        t = argv[j].text
        if t == "--":
            return j + 1
        if not t.startswith("-") or t == "-":
            return j
        j += 2 if t in values else 1
    return j


def operands(ws: Sequence[Word], values: frozenset[str] = frozenset()) -> list[Word]:
    out, j, ended = [], 0, False
    while j < len(ws):
        t = ws[j].text
        if not ended and t == "--":
            ended = True
        elif not ended and t.startswith("-") and t != "-":
            j += 1 if t in values else 0
        else:
            out.append(ws[j])
        j += 1
    return out


def option_value(ws: Sequence[Word], short: str, long: str) -> Word | None:
    for j, w in enumerate(ws):
        if w.text in (short, long) and j + 1 < len(ws):
            return ws[j + 1]
        if w.text.startswith(long + "="):
            return Word(w.text.split("=", 1)[1], expanded=w.expanded)
    return None


def names_run(script: Script) -> Iterator[str]:
    """The names of every program `script` runs, nested ones included."""
    for pipeline in script:
        for cmd in pipeline.commands:
            if cmd.group is not None:
                yield from names_run(cmd.group)
            for w in [*cmd.words, *(r.target for r in cmd.redirects)]:
                for sub in w.subs:
                    yield from names_run(sub)
            argv, _ = argv_of(cmd.words)
            if argv:
                yield posixpath.basename(argv[0].text)


def downloads(script: Script) -> bool:
    return any(name in DOWNLOADERS for name in names_run(script))


def _dest(ws: Sequence[Word], values: frozenset[str]) -> list[Word]:
    """cp/ln/install/rsync: the target directory (-t) or the last operand."""
    target = option_value(ws, "-t", "--target-directory")
    if target is not None:
        return [target]
    ops = operands(ws, values)
    return ops[-1:] if len(ops) >= 2 else []


def _sed_files(ws: Sequence[Word]) -> list[Word]:
    texts = [w.text for w in ws]
    if not any(
        t.startswith("--in-place") or (t.startswith("-") and not t.startswith("--") and "i" in t) for t in texts
    ):
        return []
    ops = operands(ws, frozenset({"-e", "-f", "-l", "--expression", "--file"}))
    has_script = any(
        t in ("-e", "-f", "--expression", "--file") or t.startswith(("--expression=", "--file=")) for t in texts
    )
    return ops if has_script else ops[1:]


def _mode_targets(ws: Sequence[Word]) -> list[Word]:
    ops = operands(ws)
    return ops if any(w.text.startswith("--reference") for w in ws) else ops[1:]


# Programs that write the files they are given: which of their arguments they write.
WRITERS: dict[str, Callable[[Sequence[Word]], list[Word]]] = {
    "touch": lambda ws: operands(ws, frozenset({"-d", "-t", "-r", "--date", "--reference"})),
    "mkdir": lambda ws: operands(ws, frozenset({"-m", "--mode"})),
    "rmdir": operands,
    "unlink": operands,
    "tee": operands,
    "mv": operands,
    "shred": lambda ws: operands(ws, frozenset({"-n", "-s", "--iterations", "--size"})),
    "truncate": lambda ws: operands(ws, frozenset({"-s", "-r", "--size", "--reference"})),
    "cp": lambda ws: _dest(ws, frozenset({"-S", "--suffix"})),
    "ln": lambda ws: _dest(ws, frozenset({"-S", "--suffix"})),
    "install": lambda ws: (
        operands(ws, frozenset({"-m", "-o", "-g", "-S", "--mode", "--owner", "--group"}))
        if any(w.text in ("-d", "--directory") for w in ws)
        else _dest(ws, frozenset({"-m", "-o", "-g", "-S"}))
    ),
    "rsync": lambda ws: _dest(ws, frozenset({"-e", "--rsh"})),
    "chmod": _mode_targets,
    "chown": _mode_targets,
    "chgrp": _mode_targets,
    "sed": _sed_files,
}


def fork_bomb(command: str) -> str | None:
    """The name of a shell function in `command` whose body pipes it into itself (`:(){ :|:& };:`),
    or None. Reads the raw text, so quoted text counts too; linear in the length of `command`."""
    resume = 0  # a definition's body is not searched for further definitions
    close = -1  # the next "}" at or after the current head (found once per stretch of text)
    for head in _FUNCTION_HEAD.finditer(command):
        if head.start() < resume:
            continue
        if close < head.end():
            close = command.find("}", head.end())
            if close < 0:
                return None  # no body ends anywhere after here
        name = head.group(1)
        tokens = [t.group() for t in _BODY_TOKEN.finditer(command, head.end(), close)]
        for k, token in enumerate(tokens[:-2]):
            if token == name and tokens[k + 1] == "|":
                after = tokens[k + 2] if tokens[k + 2] != "&" else (tokens[k + 3] if k + 3 < len(tokens) else "")
                if after == name:
                    return name
        resume = close + 1
    return None


def kills_everything(texts: Sequence[str]) -> bool:
    """Whether `kill ARGS` signals process -1, that is every process it may."""
    j = 0
    if texts and texts[0] in ("-s", "-n"):
        j = 2
    elif texts and texts[0].startswith("-") and texts[0] != "--":
        j = 1  # the signal: `kill -1 123` sends SIGHUP to 123
    return "-1" in [t for t in texts[j:] if t != "--"]


def prints_environment(name: str, texts: Sequence[str]) -> bool:
    """printenv, or set / export / declare with no names: they print every variable."""
    return (
        name == "printenv"
        or (name == "set" and not texts)
        or (name in ("export", "declare", "typeset") and all(t.startswith("-") for t in texts))
    )


def shell_options(texts: Sequence[str]) -> tuple[int, bool, bool]:
    """For `sh ARGS`: where the options end, whether -c (run the next argument) and whether -s
    (read the script from stdin) were given."""
    j, command_mode, stdin_mode = 0, False, False
    while j < len(texts):
        t = texts[j]
        if t in ("--", "-"):
            return j + 1, command_mode, stdin_mode
        if t in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            j += 2
        elif t.startswith("--"):
            j += 1
        elif t[:1] in "-+" and len(t) > 1:
            command_mode = command_mode or "c" in t[1:]
            stdin_mode = stdin_mode or "s" in t[1:]
            j += 1
        else:
            break
    return j, command_mode, stdin_mode
