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
    return _clip(f"{name} {args_preview(a)}")
