"""A parser for the shell commands models write, good enough to judge them (not to run them).

It reads bash's surface syntax: words with '…', "…", $'…' and backslash quoting; the
operators ; && || | |& & and newlines; redirections (with fd numbers, heredocs and here-strings);
( … ) subshells; and, recursively, the commands inside $( … ), `…`, <( … ) and >( … ).
What it does not model (brace expansion, aliases, `case` patterns) only makes words look odd; it
never hides a command.

Every word keeps its text with quotes removed and expansions left as written ("$HOME/x",
"$(pwd)"), so rules see what the model wrote. Text no shell would accept (an unclosed quote or
substitution, a redirection without a target) raises ShellParseError.
"""

from __future__ import annotations

import re

from shopfloor.agents.shell_ast import Command, Pipeline, Redirect, Script, ShellParseError, Word, unescape_ansi_c

__all__ = ["Command", "Pipeline", "Redirect", "Script", "ShellParseError", "Word", "parse"]

MAX_DEPTH = 24  # nested substitutions; deeper input is refused rather than recursed into


_REDIRECT_OPS = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">&", ">|", "&>", "<", ">")
_WORD_END = frozenset(" \t\n;&|()<>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
_FD = re.compile(r"[0-9]+(?=[<>])")


def parse(text: str, depth: int = 0) -> Script:
    """The pipelines of `text`, in order. Raises ShellParseError."""
    if depth > MAX_DEPTH:
        raise ShellParseError("commands are nested too deeply")
    parser = _Parser(text, depth)
    script = parser.script(None)
    parser.read_heredocs()  # a heredoc on the last line, with no newline after it
    return script


class _Parser:
    def __init__(self, text: str, depth: int) -> None:
        self.s = text
        self.i = 0
        self.depth = depth
        self.pending: list[Redirect] = []  # heredocs whose bodies start after the next newline

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def nested(self, text: str) -> Script:
        return parse(text, self.depth + 1)

    # --- commands ------------------------------------------------------------------------------

    def script(self, end: str | None) -> Script:
        pipelines: Script = []
        commands: list[Command] = []
        cmd = Command()

        def finish_command() -> None:
            nonlocal cmd
            if cmd.words or cmd.redirects or cmd.group is not None:
                commands.append(cmd)
            cmd = Command()

        def finish_pipeline() -> None:
            finish_command()
            if commands:
                pipelines.append(Pipeline(commands.copy()))
                commands.clear()

        while True:
            self.skip_blanks()
            c = self.peek()
            if not c:
                if end:
                    raise ShellParseError(f"'{end}' is missing: the command ends inside a substitution")
                finish_pipeline()
                return pipelines
            if c == end:
                self.i += 1
                finish_pipeline()
                return pipelines
            if c == "#":
                while self.peek() not in ("", "\n"):
                    self.i += 1
            elif c == "\n":
                self.i += 1
                finish_pipeline()
                self.read_heredocs()
            elif c in "<>" and self.peek(1) == "(":
                cmd.words.append(self.word())  # process substitution
            elif c in "<>" or (c == "&" and self.peek(1) == ">") or _FD.match(self.s, self.i):
                cmd.redirects.append(self.redirect())
            elif c in ";&|":
                op = self.operator()
                if op in ("|", "|&"):
                    finish_command()
                else:
                    finish_pipeline()
            elif c == "(" and not cmd.words and cmd.group is None:
                self.i += 1
                cmd.group = self.script_nested(")")
            elif c == "(":  # `name()` of a function definition: the body follows as commands
                self.i += 1
                self.skip_blanks()
                if len(cmd.words) > 1 or self.peek() != ")":
                    raise ShellParseError("'(' cannot follow the arguments of a command")
                self.i += 1
                cmd = Command()  # the definition itself runs nothing
            elif c == ")":
                self.i += 1  # a `case` pattern's closing paren outside any group
                finish_pipeline()
            else:
                cmd.words.append(self.word())

    def script_nested(self, end: str) -> Script:
        if self.depth + 1 > MAX_DEPTH:
            raise ShellParseError("commands are nested too deeply")
        self.depth += 1
        try:
            return self.script(end)
        finally:
            self.depth -= 1

    def skip_blanks(self) -> None:
        while True:
            c = self.peek()
            if c in (" ", "\t", "\r"):
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            else:
                return

    def operator(self) -> str:
        op = next(o for o in (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|") if self.s.startswith(o, self.i))
        self.i += len(op)
        return op

    def redirect(self) -> Redirect:
        fd = ""
        if m := _FD.match(self.s, self.i):
            fd = m.group()
            self.i = m.end()
        op = next(o for o in _REDIRECT_OPS if self.s.startswith(o, self.i))
        self.i += len(op)
        self.skip_blanks()
        if not self.peek() or self.peek() in _WORD_END:
            raise ShellParseError(f"the redirection '{fd}{op}' has no target")
        target = self.word()
        redirect = Redirect(op=op, target=target, fd=fd)
        if op in ("<<", "<<-"):
            self.pending.append(redirect)
        return redirect

    def read_heredocs(self) -> None:
        for redirect in self.pending:
            delimiter = redirect.target.text
            lines: list[str] = []
            while self.i < len(self.s):
                nl = self.s.find("\n", self.i)
                end = len(self.s) if nl < 0 else nl
                line = self.s[self.i : end]
                self.i = end + 1 if nl >= 0 else end
                check = line.lstrip("\t") if redirect.op == "<<-" else line
                if check.rstrip("\r") == delimiter:
                    break
                lines.append(line)
            redirect.body = "\n".join(lines)
            if not redirect.target.quoted:  # an unquoted delimiter: the body is expanded
                redirect.body_subs = _Parser(redirect.body, self.depth).expansions()
        self.pending.clear()

    def expansions(self) -> list[Script]:
        """The substitutions in text that is expanded like a double-quoted string (heredocs)."""
        subs: list[Script] = []
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\":
                self.i += 2
            elif c in "$`":
                self.dollar_or_backtick(subs)
            else:
                self.i += 1
        return subs

    # --- words ---------------------------------------------------------------------------------

    def word(self) -> Word:
        out: list[str] = []
        w = Word("")
        while True:
            c = self.peek()
            if not c:
                break
            if c in "<>" and self.peek(1) == "(" and not out:
                start = self.i
                self.i += 2
                w.subs.append(self.script_nested(")"))
                w.expanded = True
                out.append(self.s[start : self.i])
            elif c in _WORD_END:
                break
            elif c == "\\":
                if self.peek(1) == "\n":
                    self.i += 2
                    continue
                out.append(self.peek(1) or "\\")
                w.quoted = True
                self.i += 2
            elif c == "'":
                close = self.s.find("'", self.i + 1)
                if close < 0:
                    raise ShellParseError("a single quote (') is never closed")
                out.append(self.s[self.i + 1 : close])
                w.quoted = True
                self.i = close + 1
            elif c == '"' or (c == "$" and self.peek(1) == '"'):
                self.i += 1 if c == '"' else 2
                out.append(self.double_quoted(w))
                w.quoted = True
            elif c == "$" and self.peek(1) == "'":
                out.append(self.ansi_c())
                w.quoted = True
            elif c in "$`":
                out.append(self.dollar_or_backtick(w.subs, w))
            else:
                out.append(c)
                self.i += 1
        w.text = "".join(out)
        return w

    def double_quoted(self, w: Word) -> str:
        out: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise ShellParseError('a double quote (") is never closed')
            if c == '"':
                self.i += 1
                return "".join(out)
            if c == "\\":
                nxt = self.peek(1)
                if nxt == "\n":
                    pass
                elif nxt in ('"', "\\", "$", "`"):
                    out.append(nxt)
                else:
                    out.append("\\" + nxt)
                self.i += 2
            elif c in "$`":
                out.append(self.dollar_or_backtick(w.subs, w))
            else:
                out.append(c)
                self.i += 1

    def ansi_c(self) -> str:
        j = self.i + 2
        while j < len(self.s) and self.s[j] != "'":
            j += 2 if self.s[j] == "\\" else 1
        if j >= len(self.s):
            raise ShellParseError("a $'...' string is never closed")
        raw = self.s[self.i + 2 : j]
        self.i = j + 1
        return unescape_ansi_c(raw)

    def dollar_or_backtick(self, subs: list[Script], w: Word | None = None) -> str:
        """One $… expansion or `…` substitution at self.i; returns its source text."""
        start = self.i
        if self.peek() == "`":
            j = self.i + 1
            inner: list[str] = []
            while j < len(self.s) and self.s[j] != "`":
                if self.s[j] == "\\" and j + 1 < len(self.s) and self.s[j + 1] in "`\\$":
                    j += 1
                inner.append(self.s[j])
                j += 1
            if j >= len(self.s):
                raise ShellParseError("a backquote (`) is never closed")
            self.i = j + 1
            subs.append(self.nested("".join(inner)))
        elif self.s.startswith("$((", self.i) or self.peek(1) == "{":  # arithmetic or ${...}
            opening, closing = ("{", "}") if self.peek(1) == "{" else ("(", ")")
            self.i = self.balanced(self.i + 1, opening, closing)
            if self.depth >= MAX_DEPTH:
                raise ShellParseError("commands are nested too deeply")
            subs.extend(_Parser(self.s[start + 2 : self.i - 1], self.depth + 1).expansions())  # ${x:-$(cmd)}
        elif self.peek(1) == "(":
            self.i += 2
            subs.append(self.script_nested(")"))
        elif m := _NAME.match(self.s, self.i + 1):
            self.i = m.end()
        else:
            self.i += 1
            return "$"  # a lone dollar sign is literal
        if w is not None:
            w.expanded = True
        return self.s[start : self.i]

    def balanced(self, at: int, opening: str, closing: str) -> int:
        level, j = 0, at
        while j < len(self.s):
            ch = self.s[j]
            if ch == "\\":
                j += 2
                continue
            if ch == opening:
                level += 1
            elif ch == closing:
                level -= 1
                if level == 0:
                    return j + 1
            j += 1
        raise ShellParseError(f"'{opening}' is never closed by '{closing}'")
