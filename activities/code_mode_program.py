"""Runs inside the sandbox, not in the worker: the harness of a `run_python` program.

Started as `python -I <this file> <program file>` in a bubblewrap sandbox that holds no checkout
and no network. The program's read-only tool functions (read_file, list_dir, glob, grep) send each
call, as a JSON line on stdout, to the worker (activities/code_mode.py), which judges it by the
run's permission rules, runs the real tool on the real checkout, and answers on stdin. What the
program prints is kept and sent last, with its error if it raised. Nothing here is trusted: the
program can write anything to the real stdout; the worker judges every line it reads the same way.

It imports nothing of shopfloor's (the sandbox does not show shopfloor's source).
"""

import contextlib
import io
import json
import sys
import traceback

OUTPUT_CHARS = 100_000  # of what the program prints
_requests = sys.stdout
_answers = sys.stdin


class BindingError(Exception):
    """A tool call the harness refused (denied by the permission rules) or that failed."""


def _call(tool, **arguments):
    _requests.write(json.dumps({"call": tool, "arguments": arguments}) + "\n")
    _requests.flush()
    line = _answers.readline()
    if not line:
        raise SystemExit("the harness stopped answering")
    answer = json.loads(line)
    if not answer.get("ok"):
        raise BindingError(answer.get("error") or "refused")
    return answer["result"]


def read_file(path, offset=1, limit=400):
    return _call("read_file", path=path, offset=offset, limit=limit)


def list_dir(path="."):
    return _call("list_dir", path=path)


def glob(pattern, path="."):
    return _call("glob", pattern=pattern, path=path)


def grep(pattern, path=".", glob=None, ignore_case=False, max_matches=200):
    return _call("grep", pattern=pattern, path=path, glob=glob, ignore_case=ignore_case, max_matches=max_matches)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        source = f.read()
    printed = io.StringIO()
    names = {
        "__name__": "__main__",
        "read_file": read_file,
        "list_dir": list_dir,
        "glob": glob,
        "grep": grep,
        "BindingError": BindingError,
    }
    error = None
    with contextlib.redirect_stdout(printed):
        try:
            exec(compile(source, "<program>", "exec"), names)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = f"SystemExit: {exc.code}"
        except BaseException:
            error = "".join(traceback.format_exc().splitlines(keepends=True)[-8:])
    text = printed.getvalue()
    if len(text) > OUTPUT_CHARS:
        text = text[:OUTPUT_CHARS] + f"\n[output cut at {OUTPUT_CHARS} characters]"
    _requests.write(json.dumps({"done": True, "output": text, "error": error}) + "\n")
    _requests.flush()


if __name__ == "__main__":
    main()
