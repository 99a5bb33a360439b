"""One-line human summaries of tool calls, for the Temporal UI and the CLI's live view."""

from __future__ import annotations

import json
from typing import Any

_MAX = 100


def _clip(text: str, limit: int = _MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def args_preview(arguments: dict[str, Any]) -> str:
    return _clip(json.dumps(arguments, ensure_ascii=False, sort_keys=True), 160)


def summarize_call(name: str, arguments: dict[str, Any]) -> str:
    """'grep 'Login' in src/', 'read_file app/auth.py', ... — what an operator wants to see."""
    a = arguments
    if name == "read_file" and "path" in a:
        return _clip(f"read_file {a['path']}")
    if name == "list_dir":
        return _clip(f"list_dir {a.get('path', '.')}")
    if name == "glob" and "pattern" in a:
        where = a.get("path", ".")
        return _clip(f"glob '{a['pattern']}'" + ("" if where in (".", "") else f" in {where}"))
    if name == "grep" and "pattern" in a:
        where = a.get("path", ".")
        return _clip(f"grep '{a['pattern']}' in {where}")
    if name == "run_command" and isinstance(a.get("command"), str):
        return _clip(f"run_command {a['command']}")
    if name == "edit_file" and all(isinstance(a.get(k), str) for k in ("path", "old", "new")):
        return _clip(f'edit_file "{_clip(a["old"], 40)}" -> "{_clip(a["new"], 40)}" ({a["path"]})')
    if name == "write_file" and isinstance(a.get("path"), str) and isinstance(a.get("content"), str):
        lines = len(a["content"].splitlines())
        return _clip(f"write_file {a['path']} ({lines} line{'' if lines == 1 else 's'})")
    if name == "delegate" and isinstance(a.get("question"), str):
        return _clip(f'delegate "{_clip(a["question"], 80)}"')
    return _clip(f"{name} {args_preview(a)}")
