"""Text-action fallback: tool calls written as text by models without tool calling.

A model writes `Action: tool_name(arg=value, ...)` at the start of a line. Pure and
deterministic. What counts:

- Only a line whose first non-blank characters are `Action:` followed by `name(`. An `Action:`
  later in a line, in a markdown quote (`> Action: ...`), in a list item (`- Action: ...`) or
  inside a fenced code block (``` or ~~~) is a recap or an example, and is not run again.
- Arguments are keyword arguments with literal values, parsed with `ast` (never evaluated):
  strings (triple-quoted ones may span lines), numbers, booleans, None, lists, tuples (as
  lists) and dicts with string keys; JSON's `true`, `false` and `null` are accepted too.
  Positional arguments, `*args`/`**kwargs`, names and expressions give a call with
  `arguments_error` set, so the tool answers with an error the model can correct.
- A call that cannot be parsed is also returned with `arguments_error`, so the model hears
  about it instead of the run ending as if the model had finished. When its brackets never
  close (or a string is never terminated), parsing stops there: the rest of the text may be
  what was meant as its arguments, and must not run as actions of its own.
  `Action:` followed by prose (no `name(`) is prose, and ignored.
- Unknown tool names are returned as written: the loop answers "unknown tool" with the list of
  tools, as it does for native calls. A name differing from a known tool only in case is
  corrected to it.
- A line starting with `Observation:` ends the parsing: what follows it is the model imagining
  tool results, and actions based on them are not run.
- Lines inside a multi-line argument never count as actions themselves.
Call ids are `text_0`, `text_1`, ... in order of appearance.
"""

from __future__ import annotations

import ast
import math
import re
import tokenize
from collections.abc import Collection
from typing import Any

from shopfloor.models.transcript import ToolCall, ToolSpec

MAX_ACTION_CHARS = 200_000  # one action's text, arguments included

_ACTION = re.compile(r"[ \t]*Action:[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\(")
_FENCE = re.compile(r"[ \t]*(```|~~~)")
_OBSERVATION = re.compile(r"[ \t]*Observation:")
_JSON_NAMES = {"true": True, "false": False, "null": None}
_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, tokenize.TokenError)


class _BadArguments(Exception):
    pass


def _call_end(text: str, start: int) -> int | None:
    """The length of the call `name(...)` at `text[start:]`, or None if it never closes within
    MAX_ACTION_CHARS. Reads only as far as the call goes, so a reply full of actions is parsed in
    time linear in its length."""
    depth = 0
    stop = min(len(text), start + MAX_ACTION_CHARS)
    # Where each line tokenize has read starts (lines split at "\n" only), to turn (row, col)
    # into an offset.
    line_starts = [0]

    def readline() -> str:
        at = start + line_starts[-1]
        if at >= stop:
            return ""
        newline = text.find("\n", at, stop)
        line = text[at : stop if newline < 0 else newline + 1]
        line_starts.append(line_starts[-1] + len(line))
        return line

    try:
        for tok in tokenize.generate_tokens(readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
                if depth <= 0:
                    row, col = tok.end
                    return line_starts[row - 1] + col
            elif tok.type == tokenize.ENDMARKER:
                return None
    except _PARSE_ERRORS:
        return None
    return None


def _literal(node: ast.expr) -> Any:
    """A keyword value as JSON-compatible data; raise _BadArguments for anything else."""
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for k, v in zip(node.keys, node.values):
            key = _literal(k) if k is not None else None
            if not isinstance(key, str):
                raise _BadArguments("dictionary keys must be strings")
            out[key] = _literal(v)
        return out
    try:
        value = ast.literal_eval(node)
    except _PARSE_ERRORS:
        raise _BadArguments("values must be literals (strings, numbers, True/False, None, lists, dicts)") from None
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise _BadArguments(f"unsupported value {type(value).__name__}")


def _arguments(call_text: str, name: str) -> tuple[dict[str, Any], str | None]:
    try:
        tree = ast.parse(call_text, mode="eval")
    except _PARSE_ERRORS as exc:
        msg = exc.msg if isinstance(exc, SyntaxError) and exc.msg else type(exc).__name__
        return {}, f"could not parse the action {name}(...): {msg}; write {name}(arg=value, ...)"
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return {}, f"could not parse the action {name}(...); write {name}(arg=value, ...)"
    if call.args:
        return {}, f"positional arguments are not supported: write {name}(arg=value, ...) with argument names"
    arguments: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            return {}, f"**arguments are not supported: write {name}(arg=value, ...)"
        if kw.arg in arguments:
            return {}, f"argument {kw.arg!r} is given twice"
        try:
            arguments[kw.arg] = _literal(kw.value)
        except _BadArguments as exc:
            return {}, f"argument {kw.arg!r}: {exc}"
        except (RecursionError, MemoryError):
            return {}, f"argument {kw.arg!r} is too deeply nested"
    return arguments, None


def parse_text_actions(text: str, known_tools: Collection[str]) -> list[ToolCall]:
    """The tool calls written as line-initial `Action: name(arg=...)` lines in `text`."""
    # Sorted, and only unambiguous names: a set's order varies between processes (hash seeds).
    lowered: dict[str, list[str]] = {}
    for t in sorted(known_tools):
        lowered.setdefault(t.lower(), []).append(t)
    by_lower = {k: v[0] for k, v in lowered.items() if len(v) == 1}
    calls: list[ToolCall] = []
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    in_fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            if in_fence is None:
                in_fence = fence.group(1)
            elif fence.group(1) == in_fence:
                in_fence = None
            i += 1
            continue
        if in_fence is not None:
            i += 1
            continue
        if _OBSERVATION.match(line):
            break
        match = _ACTION.match(line)
        if not match:
            i += 1
            continue
        name = match.group(1)
        if name not in known_tools and name.lower() in by_lower:
            name = by_lower[name.lower()]
        start = offsets[i] + match.start(1)
        end = _call_end(text, start)
        call_id = f"text_{len(calls)}"
        if end is None:
            calls.append(
                ToolCall(
                    id=call_id,
                    name=name,
                    arguments_error=(
                        f"could not parse the action {name}(...): unbalanced brackets or an unterminated "
                        f"string; write {name}(arg=value, ...) with Python literal values"
                    ),
                )
            )
            break  # where it was meant to end is unknown: the rest may be its arguments
        arguments, error = _arguments(text[start : start + end], name)
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments, arguments_error=error))
        # Continue after the line where the call ends: its own lines never count as actions.
        absolute_end = start + end
        while i < len(lines) and offsets[i + 1] <= absolute_end:
            i += 1
        if i < len(lines) and offsets[i] < absolute_end:
            i += 1
    return calls


def _type_name(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " | ".join(_type_name(s) for s in schema["anyOf"])
    names = {
        "string": "str",
        "integer": "int",
        "number": "float",
        "boolean": "bool",
        "array": "list",
        "object": "dict",
        "null": "None",
    }
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(names.get(k, str(k)) for k in kind)
    return names.get(kind, "any") if isinstance(kind, str) else "any"


def _signature(spec: ToolSpec) -> tuple[str, list[str]]:
    props: dict[str, Any] = spec.parameters.get("properties", {}) or {}
    required = set(spec.parameters.get("required", []) or [])
    params, notes = [], []
    for pname, schema in props.items():
        if not isinstance(schema, dict):
            continue
        part = f"{pname}: {_type_name(schema)}"
        if pname not in required and "default" in schema:
            part += f" = {schema['default']!r}"
        params.append(part)
        if schema.get("description"):
            notes.append(f"    {pname}: {schema['description']}")
    return f"{spec.name}({', '.join(params)})", notes


def text_action_instructions(tools: list[ToolSpec]) -> str:
    """The system-prompt addendum for a model without native tool calling."""
    blocks = []
    for spec in tools:
        signature, notes = _signature(spec)
        blocks.append("\n".join([f"- {signature}", f"    {spec.description}", *notes]))
    return f"""# Using tools

You call tools by writing actions as text. An action is one line that starts with `Action:`
followed by a tool call with keyword arguments and Python literal values:

Action: tool_name(arg="value", other=2)

Rules:
- `Action:` must be the very start of the line. Only such lines run; you may write several, one
  per line, and they run in order.
- Use argument names, never positional arguments. Values are literals: "strings" (use
  \"\"\"triple quotes\"\"\" for text spanning several lines), numbers, True/False, None, [lists],
  {{"key": "value"}} dicts. No variables, expressions or function calls inside the arguments.
- After your actions, stop and wait: the results come back in the next message. Never write
  the results yourself.
- To mention an earlier action without running it again, quote it (`> ...`), put it in a code
  block, or write it in the middle of a sentence, never at the start of a line.
- When the work is done, answer with your final text and no `Action:` line.

Tools:
{chr(10).join(blocks) if blocks else "(none)"}
"""
