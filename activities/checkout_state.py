"""The state a run's checkout is in, as recorded beside it: `<checkout>/.git/shopfloor-ref.json`
holding {base_sha, patch_digest, dirty}.

It is replaced atomically and only once the disk matches it. Workspaces.open() marks it dirty
before handing the checkout to a caller that may change it, so a worker that died between an edit
and its checkpoint leaves a state the next open() distrusts: it rebuilds from the ref.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

STATE_FILE = "shopfloor-ref.json"


def read_state(path: Path) -> dict[str, object] | None:
    """The recorded state of the checkout at `path`, or None when there is none to trust."""
    try:
        state = json.loads((path / ".git" / STATE_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def is_state(path: Path, base: str, digest: str | None, *, dirty: bool) -> bool:
    return read_state(path) == {"base_sha": base, "patch_digest": digest, "dirty": dirty}


def write_state(path: Path, base: str, digest: str | None, dirty: bool) -> None:
    target = path / ".git" / STATE_FILE
    tmp = target.with_name(f"{STATE_FILE}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps({"base_sha": base, "patch_digest": digest, "dirty": dirty}), "utf-8")
    os.replace(tmp, target)  # readers see the old state or the new one, never half of one


def forget_state(path: Path) -> None:
    """Distrust the checkout until a rebuild records it again (a half-done reset stays distrusted)."""
    try:
        os.unlink(path / ".git" / STATE_FILE)
    except (FileNotFoundError, NotADirectoryError):
        pass
