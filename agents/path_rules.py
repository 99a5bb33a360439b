"""Where a path a model names points, seen from the workspace: the facts permission rules use.

Pure string work: nothing here touches the file system. The workspace root is ".", paths are
judged after `..` and `.` are folded, the home directory is written "~" ($HOME and ${HOME} count
as "~"), and a path built from a variable ("$DIR/x") is as unknown as the variable.
"""

from __future__ import annotations

import posixpath
import re
from enum import Enum
from typing import Literal

Decision = Literal["allow", "ask", "deny"]

TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
HARMLESS_FILES = frozenset({"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty"})
_HARMLESS_FD = re.compile(r"/(dev|proc/self)/fd/[0-9]+")
_HOME = re.compile(r"^(\$HOME|\$\{HOME\})(?=/|$)")
_HERE = re.compile(r"^(\$PWD|\$\{PWD\}|\$\(pwd\)|`pwd`)(?=/|$)")
HOME = "/~"  # the home directory in normalized paths


class Where(Enum):
    ROOT = "the filesystem root"
    HOME = "a home directory"
    HOME_PATH = "a path in a home directory"
    WORKSPACE = "the whole workspace"
    INSIDE = "a path inside the workspace"
    GIT = "git metadata (.git)"
    ESCAPE = "a path above the workspace root"
    OUTSIDE = "a path outside the workspace"
    TEMP_ROOT = "a shared temporary directory"
    TEMP = "a temporary path"
    DEVICE = "a device"
    HARMLESS = "a harmless special file"
    UNKNOWN = "a path that depends on a variable"


# (pattern over a path with "~" for home, what it holds). Public keys (*.pub) are not secrets.
CREDENTIALS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p), what)
    for p, what in [
        (r"(^|/)\.ssh(/|$)", "SSH keys and configuration"),
        (r"(^|/)id_(rsa|dsa|ecdsa|ed25519)(_sk)?$", "an SSH private key"),
        (r"(^|/)\.aws(/|$)", "AWS credentials"),
        (r"(^|/)[._]netrc$", "login credentials (.netrc)"),
        (r"(^|/)\.git-credentials$", "stored git credentials"),
        (r"(^|/)\.config/(gh|hub)(/|$)", "GitHub CLI tokens"),
        (r"(^|/)\.config/gcloud(/|$)", "Google Cloud credentials"),
        (r"(^|/)\.azure(/|$)", "Azure credentials"),
        (r"(^|/)\.docker/config\.json$", "container registry credentials"),
        (r"(^|/)\.kube/config$", "Kubernetes credentials"),
        (r"(^|/)\.gnupg(/|$)", "GnuPG keys"),
        (r"(^|/)\.password-store(/|$)", "a password store"),
        (r"(^|/)\.pypirc$", "package upload tokens (.pypirc)"),
        (r"(^|/)\.vault-token$", "a Vault token"),
        (r"(^|/)\.terraform\.d/credentials", "Terraform credentials"),
        (r"^(~|/root|/home/[^/]+)/\.(npmrc|yarnrc|cargo/credentials|gem/credentials)", "package registry tokens"),
        (r"^(~|/root|/home/[^/]+)/\.shopfloor(/|$)", "shopfloor's own data"),
        (r"^/etc/(g?shadow-?|sudoers(\.d)?|master\.passwd)(/|$)", "system password data"),
        (r"^/proc/[^/]+/environ$", "the environment of a process"),
        (r"^(/var)?/run/secrets(/|$)", "mounted service secrets"),
    ]
]


def home_form(text: str) -> str:
    """`text` with a leading $HOME or ${HOME} written as "~"."""
    return _HOME.sub("~", text)


def credential(text: str) -> str | None:
    """What secret `text` names, if it names one: the path itself, a `--opt=PATH` value, an
    `@PATH` (curl's file upload), or a `host:PATH` (scp)."""
    candidates = {text}
    for sep in ("=", ":"):
        if sep in text:
            candidates.add(text.split(sep, 1)[1])
    for c in list(candidates):
        candidates.add(home_form(c.lstrip("@")))
    for c in candidates:
        for pattern, what in CREDENTIALS:
            if pattern.search(c):
                return what
    return None


def cwd_after_cd(target: str | None, cwd: str | None) -> str | None:
    """The directory `cd target` leads to (None: unknown), in locate()'s notation."""
    if target is None:
        return HOME
    target = _HERE.sub(".", home_form(target))
    if "$" in target or "`" in target or target == "-":
        return None
    return _normal(target, cwd)


def locate(text: str, cwd: str | None, *, expanded: bool = False) -> tuple[Where, str]:
    """Where `text` points when commands run in `cwd` ("." is the workspace root, None unknown).

    Returns the place and the normalized path (absolute, HOME-based, or relative to the root).
    """
    t = _HERE.sub(".", home_form(text))
    if expanded or "$" in t or "`" in t:
        cut = min((i for i in (t.find("$"), t.find("`")) if i >= 0), default=-1)
        if cut >= 0:
            head = t[:cut]
            if "/" not in head:
                return Where.UNKNOWN, text
            t = head[: head.rfind("/") + 1] + "_"  # some name inside that directory
    path = _normal(t, cwd)
    if path is None:
        return Where.UNKNOWN, text
    return _classify(path), path


def _normal(t: str, cwd: str | None) -> str | None:
    if t.startswith("~"):
        head, _, rest = t[1:].partition("/")
        base = HOME if not head else "/home/" + head  # "~user": another user's home
        t = base + ("/" + rest if rest else "")
    if not t.startswith("/"):
        if cwd is None:
            return None
        t = posixpath.join(cwd, t)
    path = posixpath.normpath(t)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return path


def _all_entries(name: str) -> bool:
    """'*', '.*', '?*', '**': a name of only *, ? and . with a wildcard matches every entry of a
    directory. (Not a regex: `[*?.]*[*?][*?.]*` backtracks quadratically on a long name.)"""
    return ("*" in name or "?" in name) and not name.strip("*?.")


def _classify(path: str) -> Where:
    parent, name = posixpath.split(path)
    every = _all_entries(name)
    if not path.startswith("/"):
        if path == "." or (parent == "" and every):
            return Where.WORKSPACE
        if path == ".." or path.startswith("../"):
            return Where.ESCAPE
        if ".git" in path.lower().split("/"):
            return Where.GIT
        return Where.INSIDE
    if path == "/" or (parent == "/" and every):
        return Where.ROOT
    if path in (HOME, "/root", "/home") or parent == "/home" or (parent in (HOME, "/root") and every):
        return Where.HOME
    if path.startswith((HOME + "/", "/root/", "/home/")):
        return Where.HOME_PATH
    if path in HARMLESS_FILES or _HARMLESS_FD.fullmatch(path):
        return Where.HARMLESS
    if path.startswith("/dev/"):
        return Where.DEVICE
    for tmp in TEMP_DIRS:
        if path == tmp or (parent == tmp and every):
            return Where.TEMP_ROOT
        if path.startswith(tmp + "/"):
            return Where.TEMP
    return Where.OUTSIDE


_WRITE_DENIED = {Where.ROOT, Where.HOME, Where.HOME_PATH, Where.ESCAPE, Where.OUTSIDE, Where.DEVICE, Where.GIT}
_REMOVE_DENIED = _WRITE_DENIED | {Where.WORKSPACE, Where.TEMP_ROOT}
OUTSIDE_HINT = "commands may write only inside the workspace (use paths relative to the repository root) or under /tmp."


def show(text: str, limit: int = 120) -> str:
    """Text quoted for a reason: whitespace folded, long text cut."""
    text = " ".join(text.split())
    return f"`{text[:limit]}…`" if len(text) > limit else f"`{text}`"


def write_problem(text: str, cwd: str | None, *, expanded: bool = False) -> str | None:
    """Why a command may not write to `text` (None: it may)."""
    where, _ = locate(text, cwd, expanded=expanded)
    if where is Where.GIT:
        return f"writing to {show(text)} is not allowed: .git is managed by shopfloor; change files in the working tree instead."
    if where in _WRITE_DENIED:
        return f"writing to {show(text)} is not allowed: it is {where.value}; {OUTSIDE_HINT}"
    return None


def removal_problem(text: str, cwd: str | None, *, expanded: bool = False) -> tuple[Decision, str] | None:
    """Whether `rm -r text` is refused ("deny") or needs an operator ("ask"), and why."""
    where, _ = locate(text, cwd, expanded=expanded)
    if where is Where.UNKNOWN and not expanded and not text.startswith(("/", "~")):
        # A plain relative path from a directory we lost track of (`cd "$X"`): fine unless it is
        # one of the forms that mean "everything here" or "the parent".
        where = Where.INSIDE if locate(text, ".")[0] is Where.INSIDE else Where.UNKNOWN
    if where in _REMOVE_DENIED:
        return "deny", (
            f"rm -r of {show(text)} is not allowed: it would delete {where.value}. "
            "Delete specific files or directories inside the workspace instead."
        )
    if where is Where.UNKNOWN:
        return "ask", (
            f"rm -r of {show(text)} needs an operator's approval: what it deletes depends "
            "on a value not known until it runs."
        )
    return None
