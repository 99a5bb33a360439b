"""Plain HTML pages at GitHub's own URL paths, so every link shopfloor prints or writes opens in a
browser against the simulator: a repository, a branch, a commit, an issue (its conversation and
labels, comments rendered as markdown) and a pull request (conversation, reviews with their line
comments, checks, and the diff).

Everything shown is text people and models wrote, so nothing is trusted: markdown is rendered
with raw HTML off (escaped, as text) and HTML comments removed (GitHub hides them too), links
pass markdown-it's URL check (no `javascript:`), and every other value is escaped. Private
repositories have no pages (a browser has no token): 404, as GitHub shows a stranger.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from html import escape

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markdown_it import MarkdownIt

from shopfloor.simulator.core import Simulator
from shopfloor.simulator.store import Issue, Repo

router = APIRouter()
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_STYLE = """
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1f2328; }
header { background: #24292f; color: #fff; padding: 10px 24px; } header a { color: #fff; }
main { max-width: 1012px; margin: 24px auto; padding: 0 16px; }
a { color: #0969da; text-decoration: none; } a:hover { text-decoration: underline; }
.state { display: inline-block; padding: 2px 10px; border-radius: 2em; color: #fff; font-weight: 600; }
.open { background: #1f883d; } .closed { background: #cf222e; } .merged { background: #8250df; }
.label { display: inline-block; padding: 0 8px; border-radius: 2em; border: 1px solid #d0d7de; margin-right: 4px; }
.box { border: 1px solid #d0d7de; border-radius: 6px; margin: 16px 0; }
.box > .head { background: #f6f8fa; border-bottom: 1px solid #d0d7de; padding: 8px 16px; }
.box > .body { padding: 8px 16px; overflow-x: auto; }
table { border-collapse: collapse; } td, th { border: 1px solid #d0d7de; padding: 4px 10px; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
pre.diff { padding: 0; } pre.diff span { display: block; padding: 0 8px; }
.add { background: #dafbe1; } .del { background: #ffebe9; } .hunk { background: #ddf4ff; color: #57606a; }
.muted { color: #57606a; }
"""


def _when(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC")


def _sim(request: Request) -> Simulator:
    return request.app.state.sim


def _page(sim: Simulator, title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<style>{_STYLE}</style></head><body><header><a href="{escape(sim.config.base_url)}/">'
        "GitHub simulator</a> · shopfloor</header><main>"
        f"{body}</main></body></html>"
    )
    return HTMLResponse(html, status_code=status)


def _not_found(sim: Simulator) -> HTMLResponse:
    return _page(sim, "Page not found", "<h1>404</h1><p>This is not the web page you are looking for.</p>", 404)


def markdown(text: str | None) -> str:
    """A comment or body as GitHub shows it, safely: raw HTML shown as text, comments hidden."""
    return _MARKDOWN.render(_HTML_COMMENT.sub("", text or "")) or '<p class="muted">No description provided.</p>'


def _public_repo(sim: Simulator, owner: str, name: str) -> Repo | None:
    r = sim.store.repo(owner, name)
    return r if r is not None and not r.private else None


def _repo_link(sim: Simulator, r: Repo) -> str:
    return f'<a href="{escape(sim.config.base_url)}/{escape(r.full_name)}">{escape(r.full_name)}</a>'


def _box(head: str, body: str, anchor: str = "") -> str:
    ident = f' id="{escape(anchor)}"' if anchor else ""
    return f'<div class="box"{ident}><div class="head">{head}</div><div class="body">{body}</div></div>'


def _by(login: str, when: str) -> str:
    return f'<b>{escape(login)}</b> <span class="muted">{escape(when)}</span>'


def _labels(issue: Issue) -> str:
    return "".join(f'<span class="label">{escape(lab.name)}</span>' for lab in issue.labels)


def _state(issue: Issue) -> str:
    if issue.pr is not None and issue.pr.merged:
        return '<span class="state merged">Merged</span>'
    return f'<span class="state {escape(issue.state)}">{escape(issue.state.capitalize())}</span>'


def diff_html(patch: str | None) -> str:
    if not patch:
        return '<p class="muted">Binary file, or no changes to show.</p>'
    rows = []
    for line in patch.splitlines():
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        rows.append(f'<span class="{kind}">{escape(line) or "&nbsp;"}</span>')
    return f'<pre class="diff">{"".join(rows)}</pre>'


def _comments(issue: Issue) -> Iterable[tuple[datetime, str]]:
    for c in issue.comments:
        yield (
            c.created_at,
            _box(_by(c.user.login, f"commented {_when(c.created_at)}"), markdown(c.body), f"issuecomment-{c.id}"),
        )


@router.get("/", response_class=HTMLResponse)
def home_page(request: Request) -> Response:
    sim = _sim(request)
    with sim.store.lock:
        repos = sorted((r for r in sim.store.repos.values() if not r.private), key=lambda r: r.full_name)
        items = "".join(f"<li>{_repo_link(sim, r)}</li>" for r in repos)
    body = "<h1>Repositories</h1>" + (f"<ul>{items}</ul>" if items else '<p class="muted">None yet.</p>')
    body += f'<p class="muted">The REST API is at <code>{escape(sim.config.api_url)}</code>.</p>'
    return _page(sim, "GitHub simulator", body)


@router.get("/{owner}/{repo}", response_class=HTMLResponse)
def repo_page(owner: str, repo: str, request: Request) -> Response:
    sim = _sim(request)
    if repo.endswith(".git") and len(repo) > 4:  # a clone URL opened in a browser: GitHub shows the repository
        return RedirectResponse(f"{sim.config.base_url}/{owner}/{repo.removesuffix('.git')}", status_code=301)
    with sim.store.lock:
        r = _public_repo(sim, owner, repo)
        if r is None:
            return _not_found(sim)
        return _tree(sim, r, r.default_branch)


@router.get("/{owner}/{repo}/tree/{branch:path}", response_class=HTMLResponse)
def tree_page(owner: str, repo: str, branch: str, request: Request) -> Response:
    sim = _sim(request)
    with sim.store.lock:
        r = _public_repo(sim, owner, repo)
        if r is None:
            return _not_found(sim)
        if r.git.ref_sha(branch) is None:
            merged = [i for i in r.issues.values() if i.pr is not None and i.pr.head_ref == branch and i.pr.merged]
            if not merged:
                return _not_found(sim)
            # A pull request's branch deleted after its merge: say where its work went.
            pr = merged[-1]
            body = (
                f"<h1>{_repo_link(sim, r)} · <code>{escape(branch)}</code></h1>"
                f"<p>This branch was deleted after pull request "
                f'<a href="{escape(sim.config.base_url)}/{escape(r.full_name)}/pull/{pr.number}">#{pr.number}</a> '
                f"was merged into <code>{escape(pr.pr.base_ref if pr.pr else '')}</code>.</p>"
            )
            return _page(sim, f"{r.full_name} · {branch}", body)
        return _tree(sim, r, branch)


def _tree(sim: Simulator, r: Repo, branch: str) -> HTMLResponse:
    sha = r.git.ref_sha(branch)
    base = f"{escape(sim.config.base_url)}/{escape(r.full_name)}"
    head = f"<h1>{_repo_link(sim, r)}</h1><p>branch <code>{escape(branch)}</code>"
    if sha is None:
        return _page(sim, r.full_name, head + " · this repository is empty</p>")
    commit = r.git.commit(sha)
    head += f' · <a href="{base}/commit/{escape(sha)}">{escape(sha[:7])}</a> {escape(commit.message.splitlines()[0] if commit.message else "")}</p>'
    entries = "".join(
        f"<tr><td>{'📁' if kind == 'tree' else '📄'} {escape(name)}</td></tr>" for name, kind in r.git.list_dir(sha)
    )
    issues = [i for i in r.issues.values() if i.state == "open"]
    links = "".join(
        f'<li><a href="{base}/{"pull" if i.pr else "issues"}/{i.number}">#{i.number}</a> {escape(i.title)}</li>'
        for i in sorted(issues, key=lambda i: -i.number)[:50]
    )
    body = (
        head
        + f"<table>{entries}</table>"
        + _box("Open issues and pull requests", f"<ul>{links}</ul>" if links else "None")
    )
    return _page(sim, f"{r.full_name} at {branch}", body)


@router.get("/{owner}/{repo}/commit/{sha}", response_class=HTMLResponse)
def commit_page(owner: str, repo: str, sha: str, request: Request) -> Response:
    sim = _sim(request)
    with sim.store.lock:
        r = _public_repo(sim, owner, repo)
        full = r.git.resolve(sha) if r is not None and re.fullmatch(r"[0-9a-f]{4,40}", sha) else None
        if r is None or full is None:
            return _not_found(sim)
        c = r.git.commit(full)
        files = r.git.changed_files(c.parents[0], full) if c.parents else []
        diffs = "".join(
            _box(f"<code>{escape(f.filename)}</code> {escape(f.status)}", diff_html(f.patch)) for f in files
        )
        body = (
            f"<h1>{_repo_link(sim, r)}</h1><h2>{escape(c.message.splitlines()[0] if c.message else full)}</h2>"
            f"<p>{_by(c.author_name, c.author_date)} · <code>{escape(full)}</code></p>{diffs}"
        )
        return _page(sim, f"{r.full_name}@{full[:7]}", body)


@router.get("/{owner}/{repo}/issues/{number}", response_class=HTMLResponse)
def issue_page(owner: str, repo: str, number: int, request: Request) -> Response:
    sim = _sim(request)
    with sim.store.lock:
        r = _public_repo(sim, owner, repo)
        issue = r.issues.get(number) if r is not None else None
        if r is None or issue is None:
            return _not_found(sim)
        if issue.pr is not None:  # GitHub sends an issue link of a pull request to its page
            return RedirectResponse(f"{sim.config.base_url}/{r.full_name}/pull/{number}", status_code=301)
        parts = [
            f'<h1>{escape(issue.title)} <span class="muted">#{issue.number}</span></h1>',
            f"<p>{_state(issue)} {_by(issue.user.login, f'opened {_when(issue.created_at)}')} in {_repo_link(sim, r)}"
            f" {_labels(issue)}</p>",
            _box(_by(issue.user.login, "wrote"), markdown(issue.body)),
            *(box for _, box in _comments(issue)),
        ]
        return _page(sim, f"{issue.title} · Issue #{number} · {r.full_name}", "".join(parts))


@router.get("/{owner}/{repo}/pull/{number}", response_class=HTMLResponse)
def pull_page(owner: str, repo: str, number: int, request: Request) -> Response:
    from shopfloor.simulator.api.pulls import diff_range

    sim = _sim(request)
    with sim.store.lock:
        r = _public_repo(sim, owner, repo)
        issue = r.issues.get(number) if r is not None else None
        if r is None or issue is None or issue.pr is None:
            return _not_found(sim)
        pr = issue.pr
        head_owner = (pr.head_repo or r).owner.login
        conversation = list(_comments(issue))
        for rv in pr.reviews:
            lines = "".join(
                _box(
                    f"<code>{escape(str(c.get('path', '')))}</code> line {escape(str(c.get('line') or ''))}",
                    diff_html(c.get("diff_hunk")) + markdown(str(c.get("body", ""))),
                    f"discussion_r{c.get('id')}",
                )
                for c in rv.comments
            )
            verdict = {"APPROVED": "approved", "CHANGES_REQUESTED": "requested changes", "COMMENTED": "reviewed"}
            head = _by(rv.user.login, f"{verdict.get(rv.state, rv.state.lower())} {_when(rv.submitted_at)}")
            body = markdown(rv.body) if rv.body else ""
            conversation.append((rv.submitted_at, _box(head, body + lines, f"pullrequestreview-{rv.id}")))
        conversation.sort(key=lambda pair: pair[0])
        checks = [
            f"<tr><td>{escape(c.name)}</td><td>{escape(c.status)}</td><td>{escape(c.conclusion or '')}</td></tr>"
            for c in sorted(r.check_runs.values(), key=lambda c: c.id)
            if c.head_sha == pr.head_sha
        ] + [
            f"<tr><td>{escape(s.context)}</td><td>status</td><td>{escape(s.state)}</td></tr>"
            for s in r.statuses
            if s.sha == pr.head_sha
        ]
        base, head_sha = diff_range(r, issue)
        files = r.git.changed_files(base, head_sha)
        diffs = "".join(
            _box(
                f'<code>{escape(f.filename)}</code> <span class="muted">+{f.additions} −{f.deletions}</span>',
                diff_html(f.patch),
            )
            for f in files
        )
        parts = [
            f'<h1>{escape(issue.title)} <span class="muted">#{issue.number}</span></h1>',
            f"<p>{_state(issue)} {_by(issue.user.login, 'wants to merge')} "
            f"<code>{escape(head_owner)}:{escape(pr.head_ref)}</code> into <code>{escape(pr.base_ref)}</code> "
            f"of {_repo_link(sim, r)} · head <code>{escape(pr.head_sha[:7])}</code> {_labels(issue)}</p>",
            "<h2>Conversation</h2>",
            _box(_by(issue.user.login, "wrote"), markdown(issue.body)),
            *(box for _, box in conversation),
            "<h2>Checks</h2>",
            f"<table><tr><th>check</th><th>status</th><th>result</th></tr>{''.join(checks)}</table>"
            if checks
            else '<p class="muted">No checks reported on the head.</p>',
            f"<h2>Files changed ({len(files)})</h2>",
            diffs or '<p class="muted">No changes.</p>',
        ]
        return _page(sim, f"{issue.title} · Pull Request #{number} · {r.full_name}", "".join(parts))
