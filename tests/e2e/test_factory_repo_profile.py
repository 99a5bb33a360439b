"""The repository profile end to end, with agents talking to a fake OpenAI-compatible server over
HTTP (so each request's system prompt is on record):

- a Node project with no Python and no `test_command`: the detected `npm test` is the command
  the fix agent is required to run — a submit before it is refused naming it, and after
  `run_tests` passes the run goes on to the merge;
- a repository with an `AGENTS.md` (and a nested one): its instruction is in every request's
  system prompt, the nested one once the agent read a file in its folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factory_runs import APPROVE, approve_and_finish, factory, unpriced_model

from shopfloor.testing import FakeModelServer, ScriptToolCall, ScriptTurn

NODE_POLICY = "auto_fix: always\nrequire_human_approval: true\nci_timeout_minutes: 10\n"
BUGGY = "exports.greet = (name) => `Goodbye, ${name}!`;\n"
FIXED_LINE = "exports.greet = (name) => `Hello, ${name}!`;"
NODE_TRIAGE = {
    "kind": "bug",
    "severity": "medium",
    "labels": ["bug"],
    "summary": "greet() says goodbye.",
    "plan": "In lib/greet.js, greet() returns Goodbye; make it Hello. test/greet.test.js covers it.",
    "fixability": 0.9,
    "fixability_reasons": ["one line"],
}
NODE_FIX = {
    "pr_title": "greet() says hello",
    "pr_body": "greet() said goodbye.",
    "summary": "lib/greet.js: Hello, not Goodbye.",
    "tests_command": "npm test",
}


def node_repo(root: Path) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "greet.js").write_text(BUGGY)
    (root / "test").mkdir()
    (root / "test" / "greet.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const { greet } = require('../lib/greet.js');\n\n"
        "test('greets', () => { assert.strictEqual(greet('Ada'), 'Hello, Ada!'); });\n"
    )
    (root / "package.json").write_text(
        json.dumps({"name": "greet", "version": "1.0.0", "private": True, "scripts": {"test": "node --test"}})
    )
    (root / ".github").mkdir()
    (root / ".github" / "shopfloor.yml").write_text(NODE_POLICY)
    return root


def turn(name: str, **arguments: Any) -> ScriptTurn:
    return ScriptTurn(tool_calls=[ScriptToolCall(name=name, arguments=arguments)])


def by_agent(scripts: dict[str, list[ScriptTurn]]):
    """The fake server's answer: the script of the agent whose system prompt the request carries."""

    def answer(n: int, body: dict[str, Any]) -> ScriptTurn:
        agent = next(a for a in scripts if f"You are `{a}`" in system_prompt(body))
        script = scripts[agent]
        return script[n] if n < len(script) else ScriptTurn(content="out of script")

    return answer


def system_prompt(body: dict[str, Any]) -> str:
    first = (body.get("messages") or [{}])[0]
    return first.get("content") or "" if first.get("role") == "system" else ""


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m.get("content") or "" for m in body.get("messages") or [] if m.get("role") == "tool"]


async def test_a_node_repositorys_detected_test_command_is_the_one_the_fix_agent_must_run(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    scripts = {
        "triage": [turn("read_file", path="lib/greet.js"), turn("submit", **NODE_TRIAGE)],
        "fix": [
            turn("read_file", path="lib/greet.js"),
            turn("edit_file", path="lib/greet.js", old="Goodbye", new="Hello"),
            turn("submit", **NODE_FIX),  # before the tests ran: refused
            turn("run_tests"),
            turn("submit", **NODE_FIX),
        ],
        "review": [turn("read_file", path="lib/greet.js"), turn("submit", **APPROVE)],
    }
    with FakeModelServer(by_agent(scripts)) as fake:
        async with factory(
            simulator,
            settings,
            running_worker,
            temporal_client,
            tmp_path,
            {},
            source_dir=node_repo(tmp_path / "node"),
            ci_command=f"grep -qF '{FIXED_LINE}' lib/greet.js",
            **unpriced_model(fake.openai_base_url),
        ) as f:
            number = f.open_issue("greet() says goodbye", "greet('Ada') returns 'Goodbye, Ada!'.")
            outcome = await approve_and_finish(f, number)
            merged = f.file("lib/greet.js")
            final = f.progress(number)
        requests = fake.settled_requests()

    fix = [r.body for r in requests if "You are `fix`" in system_prompt(r.body)]
    assert len(fix) == 5, len(fix)
    goal = next(m["content"] for m in fix[0]["messages"] if m["role"] == "user")
    assert "The repository's test command is `npm test --silent`" in goal
    refused, ran = tool_results(fix[3])[-1], tool_results(fix[4])[-1]
    assert "run the tests first: `npm test --silent`" in refused, refused
    assert "exit code 0" in ran and "pass 1" in ran, ran  # node --test's report, from the sandbox
    assert outcome.factory is not None and outcome.factory.result == "merged", outcome
    assert FIXED_LINE in merged
    assert "fix: done; tests: `npm test --silent` (detected: package.json scripts.test (no lock file))" in final
    assert "Final state: merged." in final


async def test_agents_md_is_in_every_system_prompt_and_a_nested_one_once_its_folder_is_read(
    simulator, settings, running_worker, temporal_client, tmp_path
):
    root = node_repo(tmp_path / "node")
    (root / ".github" / "shopfloor.yml").write_text(NODE_POLICY.replace("always", "never"))
    (root / "AGENTS.md").write_text("# Conventions\n\nAlways answer in British English (colour, not color).\n")
    (root / "lib" / "AGENTS.md").write_text("Files in lib/ export one function each.\n")
    scripts = {
        "triage": [
            turn("list_dir", path="."),
            turn("read_file", path="lib/greet.js"),
            turn("submit", **NODE_TRIAGE),
        ]
    }
    with FakeModelServer(by_agent(scripts)) as fake:
        async with factory(
            simulator,
            settings,
            running_worker,
            temporal_client,
            tmp_path,
            {},
            source_dir=root,
            **unpriced_model(fake.openai_base_url),
        ) as f:
            number = f.open_issue("greet() says goodbye", "greet('Ada') returns 'Goodbye, Ada!'.")
            await f.state_when(lambda s: s.result == "parked", "triage to park under auto_fix: never")
            await f.progress_when(number, "Final state: waiting for a human")
            history = (await f.handle.fetch_history()).to_json()
        requests = fake.settled_requests()

    prompts = [system_prompt(r.body) for r in requests]
    assert len(prompts) == 3
    for prompt in prompts:
        assert "Always answer in British English (colour, not color)." in prompt
        assert prompt.index("You are `triage`") < prompt.index('<repository-instructions file="AGENTS.md">')
    # The nested one joins once the agent touched a file in its folder (the third request).
    assert ["export one function each" in p for p in prompts] == [False, False, True]
    assert "British English" not in history  # history holds the blob's digest, never the text
