"""How large a workspace's change is, and the refusal a model reads when it is too large to keep."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from shopfloor.blobs import CHUNK_BYTES

# The largest change a checkpoint stores (its patch): a setting (SHOPFLOOR_MAX_CHECKPOINT_BYTES).
DEFAULT_MAX_CHECKPOINT_BYTES = 20 * 1024 * 1024


def sum_sizes(root: Path, names: Path) -> tuple[int, list[tuple[int, str]]]:
    """Total size and the five largest of the NUL-separated paths (relative to `root`) in the file
    `names`, read as a stream: a command that made a million files costs a file of names, not memory."""
    total, rest = 0, b""
    largest: list[tuple[int, str]] = []
    with open(names, "rb") as f:
        while True:
            chunk = f.read(CHUNK_BYTES)
            *done, rest = (rest + chunk).split(b"\0")
            if not chunk:
                done.append(rest)
            for raw in done:
                if not raw:
                    continue
                name = raw.decode("utf-8", "surrogateescape")
                try:
                    st = os.lstat(root / name)
                except OSError:
                    continue  # deleted: no bytes
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
                    largest = sorted([*largest, (st.st_size, name)], reverse=True)[:5]
            if not chunk:
                return total, largest


def too_large_message(total: int, largest: list[tuple[int, str]], cap: int) -> str:
    files = ", ".join(f"{name!r} ({_mb(size)})" for size, name in largest) or "many small files"
    return (
        f"this change was not kept: a workspace's change may hold at most {_mb(cap)}, and this one holds "
        f"{_mb(total)} of new or changed files; the largest: {files}. The workspace is back to how it was "
        "before this call. Do not put large files in the repository: write them under /tmp, or remove them "
        "in the same command that makes them."
    )


def _mb(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    return f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} bytes"
