"""What of the host a command's bubblewrap sandbox sees: an allow-list of mounts, never the whole
system minus a deny-list.

Read-only: the system's programs and libraries (/usr, and /bin, /sbin, /lib* beside it), /etc
without what only its owner may read there (shadow files, private keys, sudoers: the sandbox's
root may be the host's), the Python installations named on PATH, the object directories a
checkout borrows, and what the operator adds (SHOPFLOOR_SANDBOX_READONLY_PATHS). Read-write: the
workspace, and the command's scratch directories as /tmp and /dev/shm. A fresh /dev and /proc.
Nothing else exists inside — no data directory, blob store, home, /run, /srv, /opt, /var or /mnt —
and the sandbox's own root, /dev and the covers below are read-only, so nothing but the workspace
and scratch can be written. Directories the caller names in `hide` are covered when they lie
inside something mounted.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
OWNER_ONLY_ROOTS = ("/etc",)  # where files others cannot read are covered


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _real_dir(p: str | Path) -> str | None:
    real = os.path.realpath(p)
    return real if os.path.isdir(real) else None


def shown_by_default(path: str) -> bool:
    """Whether a command's sandbox shows this host path whatever the worker's settings (the
    system directories); a secret file must lie elsewhere (or be unreadable to others in /etc)."""
    return any(_under(os.path.normpath(path), top) for top in SYSTEM)


def owner_only(top: str) -> tuple[list[str], list[str]]:
    """(files, directories) under `top` that others may not read (directories: or enter); nothing
    below such a directory is listed."""
    files: list[str] = []
    dirs: list[str] = []
    todo = [top]
    while todo:
        try:
            entries = os.scandir(todo.pop())
        except OSError:
            continue
        with entries:
            for e in entries:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if st.st_mode & 0o005 != 0o005:
                        dirs.append(e.path)
                    else:
                        todo.append(e.path)
                elif stat.S_ISREG(st.st_mode) and not st.st_mode & 0o004:
                    files.append(e.path)
    return files, dirs


def mount_args(
    ws: Path,
    *,
    tmp: Path,
    shm: Path,
    home: str,
    readonly: Sequence[str],
    hide: Sequence[Path],
    binds: Sequence[tuple[Path, str]] = (),
) -> list[str]:
    """bwrap arguments mounting the allow-list (see the module docstring). `readonly` are more
    directories to show read-only (interpreters, borrowed objects, the operator's); those inside
    the workspace come with it. `binds` are (host directory, path inside) mounted read-write after
    the workspace: a prepared environment at its fixed path."""
    workspace = str(ws)
    args: list[str] = []
    mounted: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):  # merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            mounted.append(path)
    for top in OWNER_ONLY_ROOTS:
        files, dirs = owner_only(top)
        args += [a for f in files for a in ("--ro-bind", "/dev/null", f)]
        args += [a for d in dirs for a in ("--tmpfs", d, "--remount-ro", d)]
    args += ["--bind", str(tmp), "/tmp", "--dev", "/dev", "--bind", str(shm), "/dev/shm", "--proc", "/proc"]
    extra: list[str] = []
    for shown in readonly:
        real = _real_dir(shown)
        if real and real not in extra and not _under(real, workspace) and not any(_under(real, m) for m in mounted):
            extra.append(real)
    for real in extra:  # after /tmp: a worker (or its venv) living under the host's /tmp shows through
        args += ["--ro-bind", real, real]
    # Covers over hidden directories inside what is mounted; what was asked for inside one (a
    # borrowed object directory in the data directory) is mounted again on top.
    covers: list[str] = []
    for hidden in hide:
        real = _real_dir(hidden)
        if (
            real
            and real != "/"
            and real not in covers
            and not _under(real, workspace)
            and any(_under(real, m) for m in [*mounted, *extra])
        ):
            covers.append(real)
    for real in covers:
        args += ["--tmpfs", real]
    for real in extra:
        if any(_under(real, c) for c in covers):
            args += ["--ro-bind", real, real]
    args += ["--bind", workspace, workspace, "--dir", home, "--chdir", workspace]
    for host, inside in binds:
        args += ["--bind", str(host), inside]
    for real in covers:
        args += ["--remount-ro", real]
    return args


# The last mounts of a sandbox: nothing more may be mounted after them. Its root and /dev are
# tmpfs (memory) that a command could otherwise fill.
SEAL = ["--remount-ro", "/dev", "--remount-ro", "/"]
