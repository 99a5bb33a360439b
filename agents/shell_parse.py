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
        self.text = text  # the shell text being parsed
        self.pos = 0  # index of the current character in self.text
        self.depth = depth
        self.pending: list[Redirect] = []  # heredocs whose bodies start after the next newline

    def peek(self, offset: int = 0) -> str:
        """The character `offset` places after the current one; "" past the end."""
        at = self.pos + offset
        return self.text[at] if at < len(self.text) else ""

    def nested(self, text: str) -> Script:
        return parse(text, self.depth + 1)

    # --- commands ------------------------------------------------------------------------------

    def script(self, end: str | None) -> Script:
        pipelines: Script = []
        commands: list[Command] = []
        command = Command()

        def finish_command() -> None:
            nonlocal command
            if command.words or command.redirects or command.group is not None:
                commands.append(command)
            command = Command()

        def finish_pipeline() -> None:
            finish_command()
            if commands:
                pipelines.append(Pipeline(commands.copy()))
                commands.clear()

        while True:
            self.skip_blanks()
            char = self.peek()
            if not char:
                if end:
                    raise ShellParseError(f"'{end}' is missing: the command ends inside a substitution")
                finish_pipeline()
                return pipelines
            if char == end:
                self.pos += 1
                finish_pipeline()
                return pipelines
            if char == "#":
                while self.peek() not in ("", "\n"):
                    self.pos += 1
            elif char == "\n":
                self.pos += 1
                finish_pipeline()
                self.read_heredocs()
            elif char in "<>" and self.peek(1) == "(":
                command.words.append(self.word())  # process substitution
            elif char in "<>" or (char == "&" and self.peek(1) == ">") or _FD.match(self.text, self.pos):
                command.redirects.append(self.redirect())
            elif char in ";&|":
                op = self.operator()
                if op in ("|", "|&"):
                    finish_command()
                else:
                    finish_pipeline()
            elif char == "(" and not command.words and command.group is None:
                self.pos += 1
                command.group = self.script_nested(")")
            elif char == "(":  # `name()` of a function definition: the body follows as commands
                self.pos += 1
                self.skip_blanks()
                if len(command.words) > 1 or self.peek() != ")":
                    raise ShellParseError("'(' cannot follow the arguments of a command")
                self.pos += 1
                command = Command()  # the definition itself runs nothing
            elif char == ")":
                self.pos += 1  # a `case` pattern's closing paren outside any group
                finish_pipeline()
            else:
                command.words.append(self.word())

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
            char = self.peek()
            if char in (" ", "\t", "\r"):
                self.pos += 1
            elif char == "\\" and self.peek(1) == "\n":
                self.pos += 2
            else:
                return

    def operator(self) -> str:
        op = next(
            candidate
            for candidate in (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|")
            if self.text.startswith(candidate, self.pos)
        )
        self.pos += len(op)
        return op

    def redirect(self) -> Redirect:
        fd = ""
        if match := _FD.match(self.text, self.pos):
            fd = match.group()
            self.pos = match.end()
        op = next(candidate for candidate in _REDIRECT_OPS if self.text.startswith(candidate, self.pos))
        self.pos += len(op)
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
            while self.pos < len(self.text):
                newline = self.text.find("\n", self.pos)
                end = len(self.text) if newline < 0 else newline
                line = self.text[self.pos : end]
                self.pos = end + 1 if newline >= 0 else end
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
        while self.pos < len(self.text):
            char = self.peek()
            if char == "\\":
                self.pos += 2
            elif char in "$`":
                self.dollar_or_backtick(subs)
            else:
                self.pos += 1
        return subs

    # --- words ---------------------------------------------------------------------------------

    def word(self) -> Word:
        parts: list[str] = []
        word = Word("")
        while True:
            char = self.peek()
            if not char:
                break
            if char in "<>" and self.peek(1) == "(" and not parts:
                start = self.pos
                self.pos += 2
                word.subs.append(self.script_nested(")"))
                word.expanded = True
                parts.append(self.text[start : self.pos])
            elif char in _WORD_END:
                break
            elif char == "\\":
                if self.peek(1) == "\n":
                    self.pos += 2
                    continue
                parts.append(self.peek(1) or "\\")
                word.quoted = True
                self.pos += 2
            elif char == "'":
                close = self.text.find("'", self.pos + 1)
                if close < 0:
                    raise ShellParseError("a single quote (') is never closed")
                parts.append(self.text[self.pos + 1 : close])
                word.quoted = True
                self.pos = close + 1
            elif char == '"' or (char == "$" and self.peek(1) == '"'):
                self.pos += 1 if char == '"' else 2
                parts.append(self.double_quoted(word))
                word.quoted = True
            elif char == "$" and self.peek(1) == "'":
                parts.append(self.ansi_c())
                word.quoted = True
            elif char in "$`":
                parts.append(self.dollar_or_backtick(word.subs, word))
            else:
                parts.append(char)
                self.pos += 1
        word.text = "".join(parts)
        return word

    def double_quoted(self, word: Word) -> str:
        parts: list[str] = []
        while True:
            char = self.peek()
            if not char:
                raise ShellParseError('a double quote (") is never closed')
            if char == '"':
                self.pos += 1
                return "".join(parts)
            if char == "\\":
                escaped = self.peek(1)
                if escaped == "\n":
                    pass
                elif escaped in ('"', "\\", "$", "`"):
                    parts.append(escaped)
                else:
                    parts.append("\\" + escaped)
                self.pos += 2
            elif char in "$`":
                parts.append(self.dollar_or_backtick(word.subs, word))
            else:
                parts.append(char)
                self.pos += 1

    def ansi_c(self) -> str:
        scan = self.pos + 2
        while scan < len(self.text) and self.text[scan] != "'":
            scan += 2 if self.text[scan] == "\\" else 1
        if scan >= len(self.text):
            raise ShellParseError("a $'...' string is never closed")
        raw = self.text[self.pos + 2 : scan]
        self.pos = scan + 1
        return unescape_ansi_c(raw)

    def dollar_or_backtick(self, subs: list[Script], word: Word | None = None) -> str:
        """One $… expansion or `…` substitution at self.pos; returns its source text."""
        start = self.pos
        if self.peek() == "`":
            scan = self.pos + 1
            inner: list[str] = []
            while scan < len(self.text) and self.text[scan] != "`":
                if self.text[scan] == "\\" and scan + 1 < len(self.text) and self.text[scan + 1] in "`\\$":
                    scan += 1
                inner.append(self.text[scan])
                scan += 1
            if scan >= len(self.text):
                raise ShellParseError("a backquote (`) is never closed")
            self.pos = scan + 1
            subs.append(self.nested("".join(inner)))
        elif self.text.startswith("$((", self.pos) or self.peek(1) == "{":  # arithmetic or ${...}
            opening, closing = ("{", "}") if self.peek(1) == "{" else ("(", ")")
            self.pos = self.balanced(self.pos + 1, opening, closing)
            if self.depth >= MAX_DEPTH:
                raise ShellParseError("commands are nested too deeply")
            subs.extend(_Parser(self.text[start + 2 : self.pos - 1], self.depth + 1).expansions())  # ${x:-$(cmd)}
        elif self.peek(1) == "(":
            self.pos += 2
            subs.append(self.script_nested(")"))
        elif match := _NAME.match(self.text, self.pos + 1):
            self.pos = match.end()
        else:
            self.pos += 1
            return "$"  # a lone dollar sign is literal
        if word is not None:
            word.expanded = True
        return self.text[start : self.pos]

    def balanced(self, at: int, opening: str, closing: str) -> int:
        level, scan = 0, at
        while scan < len(self.text):
            char = self.text[scan]
            if char == "\\":
                scan += 2
                continue
            if char == opening:
                level += 1
            elif char == closing:
                level -= 1
                if level == 0:
                    return scan + 1
            scan += 1
        raise ShellParseError(f"'{opening}' is never closed by '{closing}'")
