"""Markdown as GitHub shows it: the text a person reading the rendered page sees, and, apart from
it, every part the rendering hides, each labelled by kind. Pure: no I/O.

A stranger's issue can carry instructions no maintainer ever sees on GitHub: link-reference
definitions (`[//]: # (...)`), image alt text, `title` attributes, collapsed `<details>` bodies,
HTML comments. The text is read with markdown-it-py (CommonMark plus GitHub's tables,
strikethrough, task lists and alerts; raw HTML on) and HTML inside it with the standard library's
`html.parser`, so what counts as hidden is what a CommonMark parser sees, not what a regular
expression guesses. Input is capped at GitHub's body limit; the parser's nesting limit bounds its
work (linear in the input), and markdown nested deeper than people write is not read but set
apart whole, as hidden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from types import SimpleNamespace
from typing import Any, Literal

from markdown_it import MarkdownIt, helpers
from markdown_it.common.utils import unescapeAll
from markdown_it.presets import gfm_like2
from markdown_it.rules_block import StateBlock, paragraph
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from pydantic import BaseModel, Field

from shopfloor.agents.untrusted_text import strip_format_chars

MAX_CHARS = 65_536  # GitHub's cap on an issue, pull request or comment body
DEEP_LEVEL = 14  # block nesting (quotes count 1, list items 2) past which markdown is set apart unread
MAX_IMAGE_LINKS = 20  # images a body's split keeps (fewer are fetched: agents/images.py)
MAX_IMAGE_SRC = 2048  # characters of an image's address kept
MAX_OPEN = 64  # hiding HTML elements open at once; past it, the rest of the page is hidden

HiddenKind = Literal[
    "link-reference definition",
    "image alt text",
    "image address",
    "title attribute",
    "HTML attribute",
    "collapsed <details> body",
    "HTML comment",
    "removed HTML element",
    "unclosed HTML tag",
    "code block info string",
    "address of a link with no text",
    "link address GitHub drops",
    "markdown nested too deeply to read",
    "HTML nested too deeply to read",
    "markdown GitHub may read differently",
    "footnote",
]


class HiddenPart(BaseModel):
    """Text the rendered page does not show, and what hid it."""

    kind: HiddenKind
    text: str


class ImageLink(BaseModel):
    """An image people see on the rendered page: its address and alt text, as written (untrusted:
    whether and how it is fetched is decided elsewhere, agents/images.py)."""

    src: str
    alt: str = ""


class SplitMarkdown(BaseModel):
    """Markdown split into what people see and what they do not, and the images people see."""

    visible: str = ""
    hidden: list[HiddenPart] = Field(default_factory=list)
    images: list[ImageLink] = Field(default_factory=list)


# A fence's info string is shown nowhere (GitHub colours the code by its first word): a common
# language name stays beside the code, anything else is set apart.
_LANGUAGES = frozenset(
    """
    bash c c# c++ clojure cmake console cpp cs csharp css csv dart diff docker dockerfile elixir erlang
    go gradle graphql groovy haskell hcl html ini java javascript js json json5 jsonc jsx kotlin kt
    latex less lua make makefile markdown md mermaid nginx nix objc ocaml patch perl php plaintext
    powershell proto protobuf ps1 py pycon python python3 r rb ruby rs rust sass scala scss sh shell
    sql swift terraform text toml ts tsx txt typescript vue xml yaml yml zig zsh
""".split()
)
# GitHub's footnote definition; shown at the page's end only when referenced: set apart always.
_FOOTNOTE = re.compile(r"\[\^[^\]\s]+\]:")
_TAG_START = re.compile(r"<[A-Za-z/!?]")
# Link addresses GitHub's sanitizer keeps: the web, mail, and addresses without a scheme.
_SHOWN_ADDRESS = re.compile(r"(?i)(?:https?:|mailto:|(?![a-z][a-z0-9+.-]*:))")
# Elements whose content GitHub's sanitizer drops, or that browsers never show as text.
_REMOVED = frozenset(
    {
        "script",
        "style",
        "template",
        "noscript",
        "iframe",
        "noembed",
        "noframes",
        "svg",
        "math",
        "xmp",
        "plaintext",
        "title",
        "textarea",
        "select",
        "object",
    }
)
# Elements whose content an HTML parser reads as text up to their own end tag, whatever is between.
_RAW_TEXT = frozenset({"script", "style", "iframe", "noembed", "noframes", "xmp", "plaintext", "title", "textarea"})
_BREAKS = frozenset(
    {
        "br",
        "hr",
        "p",
        "div",
        "li",
        "tr",
        "td",
        "th",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "summary",
        "details",
        "table",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "blockquote",
        "pre",
    }
)
# Attributes that only shape the page; every other attribute's value is set apart as hidden.
_SHAPING = frozenset(
    {
        "align",
        "width",
        "height",
        "open",
        "colspan",
        "rowspan",
        "valign",
        "dir",
        "start",
        "type",
        "name",
        "id",
        "class",
        "lang",
        "border",
        "cellpadding",
        "cellspacing",
    }
)


def _too_deep(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """Past DEEP_LEVEL, take the rest of the container as one unread token (markdown-it would
    otherwise drop it silently at its own nesting limit)."""
    if state.level < DEEP_LEVEL or silent:
        return False
    line = start
    while line < end and (state.isEmpty(line) or state.sCount[line] >= state.blkIndent):
        line += 1
    token = state.push("too_deep", "", 0)
    token.content = state.getLines(start, line, state.blkIndent, False)
    token.map = [start, line]
    state.line = line
    return True


def _nesting_guard(state: StateInline, silent: bool) -> bool:
    """Matches nothing; notes a text markdown-it stops reading at its nesting limit: there it
    takes a link GitHub reads (`[[[…[x](u "title")`) for plain text, title and all. The whole
    text is then set apart unread."""
    if state.level >= state.md.options["maxNesting"]:
        state.env.setdefault("unread", {})[state.src] = "markdown nested too deeply to read"
    return False


def _link_destination(text: str, pos: int, end: int) -> Any:
    """A link's address as GitHub's parser reads it: like CommonMark's, but a `(` never closed
    does not end the link (`[x]: word(` is a definition on GitHub, hiding its line)."""
    result = helpers.parseLinkDestination(text, pos, end)
    if result.ok or pos >= end or text[pos] == "<":
        return result
    start, level = pos, 0
    while pos < end and text[pos] > " " and text[pos] != "\x7f":
        if text[pos] == "\\" and pos + 1 < end and text[pos + 1] > " ":
            pos += 2
            continue
        if text[pos] == "(":
            level += 1
            if level > 32:  # markdown-it's own bound, which keeps hostile input linear
                return result
        elif text[pos] == ")":
            if level == 0:
                break
            level -= 1
        pos += 1
    if pos > start:
        result.ok, result.pos, result.str = True, pos, unescapeAll(text[start:pos])
    return result


_ESCAPABLE = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # CommonMark's ASCII punctuation
_AUTOLINK = re.compile(r"(?i)(?:https?|ftp)://[\w-]+(?:\.[\w-]+)*[^\s<]*")
_ENTITY_END = re.compile(r"&[A-Za-z0-9]+;$")
_DECLARATION = re.compile(r"<![A-Z]+\s[^>]*>")


def _autolink_trimmed(url: str) -> str:
    """GFM's end of an autolink: no trailing `?!.,:*_~` or quote, entity-like `&name;` or unbalanced `)`
    (one pass from the end: linear however long the run)."""
    end, unbalanced = len(url), url.count(")") - url.count("(")
    while end:
        ch = url[end - 1]
        if ch in "?!.,:*_~'\"":
            end -= 1
        elif ch == ")" and unbalanced > 0:
            end, unbalanced = end - 1, unbalanced - 1
        elif ch == ";" and (entity := _ENTITY_END.search(url, max(0, end - 40), end)):
            end = entity.start()
        else:
            break
    return url[:end]


def _gfm_autolink(state: StateInline, silent: bool) -> bool:
    """GitHub's extended autolinks (`https://…` in plain text, the scheme not glued to a letter).
    What one takes in matters: a backtick right after a URL is part of it on GitHub, and then
    opens no code span."""
    pos, src = state.pos, state.src
    if not src.startswith("://", pos):
        return False
    scheme = next((s for s in ("https", "http", "ftp") if src[max(0, pos - len(s)) : pos].lower() == s), "")
    start = pos - len(scheme)
    if (
        not scheme
        or not state.pending.lower().endswith(scheme)
        or (start > 0 and src[start - 1].isascii() and src[start - 1].isalpha())
    ):
        return False
    match = _AUTOLINK.match(src, start, state.posMax)
    if match is None:
        return False
    url = _autolink_trimmed(match.group(0))
    if len(url) <= len(scheme) + 3:
        return False
    if "`" in url:
        # Whether GitHub links it (and so opens no code span at the backtick) depends on brackets
        # and raw <a> tags open before it, which markdown-it does not track: set apart unread.
        state.env.setdefault("unread", {})[state.src] = "markdown GitHub may read differently"
    if state.linkLevel > 0:
        return False
    if not silent:
        state.pending = state.pending[: -len(scheme)]
        token = state.push("link_open", "a", 1)
        token.attrs, token.markup = {"href": url}, "linkify"
        state.push("text", "", 0).content = url
        state.push("link_close", "a", -1).markup = "linkify"
    state.pos = start + len(url)
    return True


def _plain_backslash(state: StateInline, silent: bool) -> bool:
    """A `\\` before a character it cannot escape is a plain backslash, and the character after
    it is read on its own (markdown-it would take both as one token: `\\https://…` then makes no
    autolink, where GitHub makes one)."""
    pos = state.pos
    if state.src[pos] != "\\" or pos + 1 >= state.posMax:
        return False
    if state.src[pos + 1] in _ESCAPABLE or state.src[pos + 1] == "\n":
        return False
    if not silent:
        state.pending += "\\"
    state.pos += 1
    return True


def _declaration_text(state: StateInline, silent: bool) -> bool:
    """`<!x…>` is raw HTML to markdown-it for any letter, to GitHub's parser only as `<!NAME …>`
    (uppercase, then a space): otherwise its `<` is text, and what follows is read as markdown."""
    pos, src = state.pos, state.src
    if not src.startswith("<!", pos) or pos + 2 >= state.posMax or not _is_letter(src[pos + 2]):
        return False
    if _DECLARATION.match(src, pos, state.posMax):
        return False  # a declaration to both: html_inline reads it
    if not silent:
        state.pending += "<"
    state.pos += 1
    return True


def _declaration_paragraph(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """A line starting `<!x` (lowercase) starts an HTML block for markdown-it, a paragraph for
    GitHub's parser."""
    line = state.src[state.bMarks[start] + state.tShift[start] : state.eMarks[start]]
    if silent or state.is_code_block(start) or not (line.startswith("<!") and line[2:3].islower()):
        return False
    return paragraph(state, start, end, silent)


def _is_letter(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()


def _parser() -> MarkdownIt:
    config = gfm_like2.make()
    # Bare URLs are read by _gfm_autolink, as GitHub reads them, not by linkify-it.
    config["components"]["core"]["rules"].remove("linkify")
    config["components"]["inline"]["rules"].remove("linkify")
    config["options"]["linkify"] = False
    # Read by markdown-it's reference rule (options.get), but missing from its OptionsType.
    config["options"]["inline_definitions"] = True  # type: ignore[typeddict-unknown-key]
    md = MarkdownIt(config)
    # markdown-it refuses javascript:, data: ... links and definitions, leaving their text (titles
    # too) as visible text; GitHub makes them links and drops only the address. Read them all,
    # and show an address only where GitHub keeps it (_SHOWN_ADDRESS).
    md.validateLink = lambda url: True  # type: ignore[method-assign]  # markdown-it's documented override
    md.helpers = SimpleNamespace(  # type: ignore[assignment]  # this parser's own, not the module
        parseLinkDestination=_link_destination,
        parseLinkLabel=helpers.parseLinkLabel,
        parseLinkTitle=helpers.parseLinkTitle,
    )
    md.block.ruler.before("table", "too_deep", _too_deep)
    md.inline.ruler.before("text", "nesting_guard", _nesting_guard)
    md.inline.ruler.before("newline", "gfm_autolink", _gfm_autolink)
    md.inline.ruler.before("escape", "plain_backslash", _plain_backslash)
    md.inline.ruler.before("html_inline", "declaration_text", _declaration_text)
    md.block.ruler.before("html_block", "declaration_paragraph", _declaration_paragraph)
    md.parse("x\n")  # build the rule caches once, before any concurrent use
    return md


_MD = _parser()


@dataclass
class _Frame:
    """A container the visible text is indented under: a quote, or a list item."""

    marker: str  # "> " for a quote, "- " / "1. " / "- [x] " for a list item
    quote: bool
    started: bool = False

    def prefix(self) -> str:
        if self.quote:
            return self.marker
        if self.started:
            return " " * len(self.marker)
        self.started = True
        return self.marker


@dataclass
class _Hider:
    """An open element whose content is hidden: a `<details>`, a removed element, or a comment or
    tag left open."""

    tag: str
    kind: HiddenKind
    collapsed: bool  # a <details> without `open`; everything else always hides
    in_summary: bool = False
    text: list[str] = field(default_factory=list)
    # Closed with the quote, list item or table cell it was opened in. An open comment or tag,
    # or a raw-text element, runs on through whatever HTML the page has after it.
    scoped: bool = True
    # An open comment or raw-text element takes in all raw HTML up to this (no tag counts till then).
    until: str = ""


class _HtmlReader(HTMLParser):
    def __init__(self, splitter: _Splitter) -> None:
        super().__init__(convert_charrefs=True)
        self.splitter = splitter

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.splitter.html_start(tag, attrs, void=False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.splitter.html_start(tag, attrs, void=True)

    def handle_endtag(self, tag: str) -> None:
        self.splitter.html_end(tag)

    def handle_data(self, data: str) -> None:
        self.splitter.put(data)

    def handle_comment(self, data: str) -> None:
        self.splitter.hide("HTML comment", data)

    def handle_decl(self, decl: str) -> None:  # <!DOCTYPE ...>: a bogus comment to a browser
        self.splitter.hide("HTML comment", decl)

    def unknown_decl(self, data: str) -> None:  # <![CDATA[...]]>
        self.splitter.hide("HTML comment", data)

    def handle_pi(self, data: str) -> None:  # <?...>
        self.splitter.hide("HTML comment", data)

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        """`<![…>` outside CDATA content is a bogus comment up to the next `>` to a browser; the
        standard library's version raises AssertionError on anything but CDATA and a few keywords."""
        end = self.rawdata.find(">", i + 3)
        if end < 0:
            return -1
        self.splitter.hide("HTML comment", self.rawdata[i + 3 : end])
        return end + 1


class _Splitter:
    def __init__(self, lines: list[str], unread: dict[str, HiddenKind]) -> None:
        self.lines = lines
        self.unread = unread  # inline texts not to be trusted to read as GitHub does, and why
        # Visible blocks: text, whether it is a list's or table's line, whether a list ended before it.
        self.blocks: list[tuple[str, bool, bool]] = []
        self.hidden: list[HiddenPart] = []
        self.images: list[ImageLink] = []  # shown on the page (not inside a hiding element)
        self.frames: list[_Frame] = []
        self.hiders: list[_Hider] = []
        self.block: list[str] | None = None
        self.links: list[tuple[str, int]] = []  # open links: href, where their text starts
        # Open quotes, list items and table cells, each with the number of hiders open before it:
        # its end closes every HTML element opened in it (as a browser's parser does).
        self.scopes: list[int] = []
        self.in_table = False
        self.list_ended = False  # the next block follows a list: a blank line between them
        self.footnote_at: int | None = None  # in a footnote, at this many containers deep
        self.definition_ended = -1  # the line after the last link-reference definition

    # -- where text goes ------------------------------------------------------------------

    def _hider(self) -> _Hider | None:
        """The outermost open element hiding what is written now, if any."""
        for h in self.hiders:
            if h.collapsed and not h.in_summary:
                return h
        return None

    def put(self, text: str) -> None:
        if not text:
            return
        hider = self._hider()
        if hider is not None:
            hider.text.append(text)
            return
        if self.block is None:
            self.block = []
        self.block.append(text)

    def image(self, src: str, alt: str) -> None:
        """An image on the page: kept when people see it and there is room for it."""
        src = strip_format_chars(src).strip()
        if src and self._hider() is None and len(self.images) < MAX_IMAGE_LINKS:
            self.images.append(ImageLink(src=src[:MAX_IMAGE_SRC], alt=" ".join(strip_format_chars(alt).split())))

    def hide(self, kind: HiddenKind, text: str) -> None:
        text = text.strip()
        if text:
            self.hidden.append(HiddenPart(kind=kind, text=text))

    def start_block(self) -> None:
        self.end_block()
        self.block = []

    def end_block(self) -> None:
        hider = self._hider()
        if hider is not None:
            hider.text.append("\n")
        block, self.block = self.block, None
        text = "".join(block or []).strip("\n")
        if not text.strip():
            return
        lines = ["".join(f.prefix() for f in self.frames) + line for line in text.split("\n")]
        in_list = self.in_table or any(not f.quote for f in self.frames)
        self.blocks.append(("\n".join(line.rstrip() for line in lines), in_list, self.list_ended))
        self.list_ended = False

    def visible_block(self, text: str) -> None:
        self.start_block()
        self.put(text)
        self.end_block()

    # -- HTML -------------------------------------------------------------------------------

    def html(self, chunk: str) -> None:
        taker = next((h for h in self.hiders if h.until), None)
        if taker is not None:  # an open comment ends at the first `-->`, a <script> at `</script`
            end = chunk.lower().find(taker.until)
            if end < 0:
                taker.text.append(chunk)
                return
            taker.text.append(chunk[:end])
            self._close(taker)
            chunk = chunk[end + 3 :] if taker.until == "-->" else chunk[end:]
        reader = _HtmlReader(self)
        try:
            reader.feed(chunk)
        except (AssertionError, NotImplementedError):  # markup html.parser cannot read: hidden
            self.open_hider(_Hider("<", "unclosed HTML tag", True, text=[reader.rawdata], scoped=False))
            return
        rest = reader.rawdata  # what feed() could not finish: an unclosed comment or tag, or text
        if reader.cdata_elem is not None:  # in a <script> that goes on: close() would drop the rest
            self.put(rest)
            reader.rawdata = ""
        elif _TAG_START.match(rest):
            # A browser reads on past the end of this block: the rest of the page is in it (an
            # open tag is only closed by a quote and `>` it may never meet: hidden to the end).
            reader.rawdata = ""
            if rest.startswith("<!--"):
                self.open_hider(_Hider("<!--", "HTML comment", True, text=[rest[4:]], scoped=False, until="-->"))
            else:
                self.open_hider(_Hider("<", "unclosed HTML tag", True, text=[rest], scoped=False))
        reader.close()

    def open_hider(self, hider: _Hider) -> None:
        if len(self.hiders) < MAX_OPEN:
            self.hiders.append(hider)
        elif self.hiders[-1].kind != "HTML nested too deeply to read":
            # Not one element fewer than a browser would have open (its closing tags would then
            # reveal what the browser still hides): the rest of the page is hidden instead.
            self.hiders.append(_Hider("<", "HTML nested too deeply to read", True, scoped=False))

    def html_start(self, tag: str, attrs: list[tuple[str, str | None]], *, void: bool) -> None:
        for name, value in attrs:
            if value is None or not value.strip() or name in _SHAPING:
                continue
            if name == "title":
                self.hide("title attribute", value)
            elif name == "alt":
                self.hide("image alt text", value)
            else:
                self.hide("HTML attribute", f'{name}="{value}"')
        if tag == "img":
            found = dict(attrs)
            self.image(found.get("src") or "", found.get("alt") or "")
            self.put("[image]")
        if tag in _BREAKS:
            self.put("\n")
        if tag == "details" and not void:
            collapsed = not any(name == "open" for name, _ in attrs)
            self.open_hider(_Hider(tag, "collapsed <details> body", collapsed))
        elif tag == "summary" and self.hiders and self.hiders[-1].tag == "details":
            self.hiders[-1].in_summary = True
        elif tag in _REMOVED and not void:
            raw = tag in _RAW_TEXT
            self.open_hider(_Hider(tag, "removed HTML element", True, scoped=not raw, until=f"</{tag}" if raw else ""))

    def html_end(self, tag: str) -> None:
        if tag == "summary" and self.hiders and self.hiders[-1].tag == "details":
            self.hiders[-1].in_summary = False
        if tag in _BREAKS:
            self.put("\n")
        for i in range(len(self.hiders) - 1, -1, -1):
            if self.hiders[i].tag == tag:
                for hider in reversed(self.hiders[i:]):
                    if hider.tag not in ("<", "<!--"):  # no end tag ends an open comment or tag
                        self._close(hider)
                return

    def end_scope(self) -> None:
        opened_before = self.scopes.pop() if self.scopes else 0
        if any(not h.scoped for h in self.hiders):
            return  # the container's end tag is inside an open comment, tag or <script>: not seen
        for hider in reversed([h for h in self.hiders[opened_before:] if h.scoped]):
            self._close(hider)

    def _close(self, hider: _Hider) -> None:
        self.hiders.remove(hider)
        text = "".join(hider.text).strip()
        if not text:
            return
        outer = self._hider()
        if outer is not None:  # nested in another hidden element: part of its text
            outer.text.append(text + "\n")
        else:
            self.hide(hider.kind, text)

    # -- markdown ---------------------------------------------------------------------------

    def tokens(self, tokens: list[Token]) -> None:
        for token in tokens:
            self.token(token)
        self.end_block()
        for hider in reversed(list(self.hiders)):  # GitHub closes what is left open at the end
            self._close(hider)

    def token(self, t: Token) -> None:  # noqa: C901 - one branch per token type, flat on purpose
        kind = t.type
        if kind == "paragraph_open":
            self.footnote_at = len(self.frames)  # until its text shows it is not a footnote
        elif kind.endswith("_open") or kind in ("fence", "html_block", "hr", "definition", "too_deep"):
            self.footnote_at = None
        if kind in ("paragraph_open", "heading_open", "tr_open", "alert_title_open"):
            self.start_block()
            if kind == "heading_open":
                self.put("#" * int(t.tag[1:]) + " ")
        elif kind in ("paragraph_close", "heading_close", "tr_close", "alert_title_close"):
            self.end_block()
        elif kind in ("blockquote_open", "alert_open"):
            self.end_block()
            self.frames.append(_Frame("> ", quote=True))
            self.scopes.append(len(self.hiders))
        elif kind in ("blockquote_close", "alert_close", "list_item_close"):
            self.end_block()
            self.end_scope()
            if self.frames:
                self.frames.pop()
        elif kind == "list_item_open":
            self.end_block()
            marker = f"{t.info}{t.markup}" if t.info else "-"
            if "checked" in t.meta:
                marker += " [x]" if t.meta["checked"] else " [ ]"
            self.frames.append(_Frame(marker + " ", quote=False))
            self.scopes.append(len(self.hiders))
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self.end_block()
            self.list_ended = not any(not f.quote for f in self.frames)  # not a list in a list
        elif kind in ("table_open", "table_close"):
            self.end_block()
            self.in_table = kind == "table_open"
        elif kind in ("th_open", "td_open"):
            if self.block:
                self.put(" | ")
            self.scopes.append(len(self.hiders))
        elif kind in ("th_close", "td_close"):
            self.end_scope()
        elif kind == "inline":
            if self.footnote_at == len(self.frames) and _FOOTNOTE.match(t.content):
                self.hide("footnote", t.content)
                return
            self.footnote_at = None
            if t.content in self.unread:
                self.hide(self.unread[t.content], t.content)
            else:
                self.inline(t.children or [])
        elif kind == "fence":
            info = t.info.strip()
            language = info.split(maxsplit=1)[0] if info else ""
            if language.lower() not in _LANGUAGES:
                language = ""
            if info != language:
                self.hide("code block info string", info)
            self.visible_block(f"{t.markup}{language}\n{t.content.rstrip(chr(10))}\n{t.markup}")
        elif kind == "code_block" and t.map and t.map[0] == self.definition_ended:
            # On GitHub an indented line right after a definition continues its paragraph.
            self.hide("markdown GitHub may read differently", t.content)
        elif kind == "code_block" and self.footnote_at == len(self.frames):
            self.hide("footnote", t.content)  # a footnote's indented paragraphs are the footnote
        elif kind == "code_block":
            fence = "~~~~" if "```" in t.content else "```"
            self.visible_block(f"{fence}\n{t.content.rstrip(chr(10))}\n{fence}")
        elif kind == "hr":
            self.visible_block("---")
        elif kind == "html_block":
            self.start_block()
            self.html(t.content)
            self.end_block()
        elif kind == "definition":
            self.definition_ended = t.map[1] if t.map else -1
            raw = "\n".join(self.lines[t.map[0] : t.map[1]]) if t.map else ""
            if str(t.meta.get("label", "")).startswith("^"):
                self.hide("footnote", raw)
                self.footnote_at = len(self.frames)  # its indented paragraphs follow
            else:
                self.hide("link-reference definition", raw)
        elif kind == "too_deep":
            self.hide("markdown nested too deeply to read", t.content)
        # Everything else (list and table openers, emphasis carried in inline) adds no text.

    def inline(self, children: list[Token]) -> None:
        for c in children:
            kind = c.type
            if kind == "text":
                self.put(c.content)
            elif kind in ("softbreak", "hardbreak"):
                self.put("\n")
            elif kind == "code_inline":
                self.put(f"{c.markup}{c.content}{c.markup}")
            elif kind in ("s_open", "s_close"):
                self.put(c.markup)
            elif kind == "html_inline":
                self.html(c.content)
            elif kind == "link_open":
                title = str(c.attrs.get("title") or "")
                if title:
                    self.hide("title attribute", title)
                href = "" if c.markup in ("autolink", "linkify") else str(c.attrs.get("href") or "")
                self.links.append((href, len(self.block or [])))
            elif kind == "link_close" and self.links:
                href, start = self.links.pop()
                shown = "".join((self.block or [])[start:]).strip()
                if not href or self._hider() is not None:
                    continue
                if not _SHOWN_ADDRESS.match(href):
                    self.hide("link address GitHub drops", href)
                elif not shown:
                    self.hide("address of a link with no text", href)
                elif shown != href:
                    self.put(f" ({href})")
            elif kind == "image":
                self.image(str(c.attrs.get("src") or ""), c.content)
                self.put("[image]")
                self.hide("image alt text", c.content)
                title = str(c.attrs.get("title") or "")
                if title:
                    self.hide("title attribute", title)
                self.hide("image address", str(c.attrs.get("src") or ""))

    def result(self) -> SplitMarkdown:
        out: list[str] = []
        for i, (text, in_list, after_list) in enumerate(self.blocks):
            if i:  # lines of one list or table are tight; everything else is a paragraph apart
                out.append("\n" if in_list and self.blocks[i - 1][1] and not after_list else "\n\n")
            out.append(text)
        hidden = [HiddenPart(kind=p.kind, text=t) for p in self.hidden if (t := strip_format_chars(p.text).strip())]
        return SplitMarkdown(visible=strip_format_chars("".join(out)), hidden=hidden, images=self.images)


def split_markdown(text: str) -> SplitMarkdown:
    """What people see of `text` rendered on GitHub, and the hidden parts apart (in order).

    Format characters go first (GitHub shows none of them); a text past MAX_CHARS is cut there.
    """
    text = strip_format_chars((text or "").replace("\r\n", "\n").replace("\r", "\n"))
    cut = len(text) > MAX_CHARS
    text = text[:MAX_CHARS]
    env: dict[str, dict[str, HiddenKind]] = {}
    tokens = _MD.parse(text, env)
    splitter = _Splitter(text.split("\n"), env.get("unread", {}))
    splitter.tokens(tokens)
    split = splitter.result()
    if cut:
        split.visible += f"\n\n[… cut at {MAX_CHARS:,} characters]"
    return split
