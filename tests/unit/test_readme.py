"""The docs against the code: README's configuration table against the settings model, every
`shopfloor <command>` the README names against the CLI, and docs/architecture.md against the
modules on disk. Each check is a function returning its problems, so the tests at the bottom can
show that a broken document is caught."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices, AliasPath, SecretStr

from shopfloor.cli.lazy import every_command
from shopfloor.settings import Settings

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE_FOLDERS = ("shopfloor", "workflows", "activities", "agents", "webhooks")


# --- markdown -------------------------------------------------------------------------------------


def section(text: str, heading: str) -> str:
    """The body of the `## heading` section (up to the next `## `)."""
    match = re.search(rf"^## {re.escape(heading)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"no `## {heading}` section"
    return match.group(1)


def table_rows(text: str) -> list[list[str]]:
    """Body rows of the first markdown table in `text`, cells stripped (`\\|` stays in a cell)."""
    rows: list[list[str]] = []
    lines = [line for line in text.splitlines() if line.startswith("|")]
    for line in lines[2:]:  # header and separator
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        rows.append(cells)
    return rows


def code_texts(text: str) -> list[str]:
    """Everything in fenced code blocks and inline code spans."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    rest = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return fenced + re.findall(r"`([^`\n]+)`", rest)


# --- settings -------------------------------------------------------------------------------------


def env_names() -> dict[str, str]:
    """Every environment variable the settings model reads -> its field name.

    pydantic-settings reads `env_prefix + field name` unless the field has a validation alias,
    which then replaces the name (the providers' own OPENAI_API_KEY, ...). Not case-sensitive,
    so everything is compared upper-cased."""
    prefix = Settings.model_config.get("env_prefix", "")
    names: dict[str, str] = {}
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias or field.alias
        if alias is None:
            choices: list[Any] = [prefix + field_name]
        elif isinstance(alias, AliasChoices):
            choices = list(alias.choices)
        else:
            choices = [alias]
        for choice in choices:
            if isinstance(choice, AliasPath):  # a path into a nested value: not an env name
                continue
            names[str(choice).upper()] = field_name
    return names


CONFIG_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def config_rows(readme: str) -> list[tuple[list[str], str]]:
    """(variable names, default cell) of each row of the configuration table."""
    out = []
    for cells in table_rows(section(readme, "Configuration")):
        names = [n for n in re.findall(r"`([^`]+)`", cells[0]) if CONFIG_NAME.match(n)]
        out.append((names, cells[1] if len(cells) > 1 else ""))
    return out


UNSET = object()


def literal_default(part: str) -> Any:
    """What a default cell states, when it states a literal: None for `unset …`, the text of a
    lone code span (a trailing note in parentheses allowed), else UNSET (prose, placeholders)."""
    part = part.strip()
    if re.match(r"unset\b", part):
        return None
    match = re.fullmatch(r"`([^`]*)`(\s*\(.*\))?", part)
    if match is None or "<" in match.group(1):
        return UNSET
    return match.group(1)


def split_defaults(cell: str, count: int) -> list[Any]:
    """One stated default per name of a row (`a` / `b`, or `a`, `b`); UNSET where unclear."""
    if count == 1:
        return [literal_default(cell)]
    for separator in (" / ", ", "):
        parts = cell.split(separator)
        if len(parts) == count:
            return [literal_default(p) for p in parts]
    single = literal_default(cell)
    return [single if single is None else UNSET] * count  # "unset" for every name of the row


def default_matches(model_default: Any, stated: Any) -> bool:
    if stated is None or model_default is None:
        return stated is None and model_default is None
    if isinstance(model_default, SecretStr):
        return model_default.get_secret_value() == stated
    if isinstance(model_default, bool):
        return stated.lower() == str(model_default).lower()
    if isinstance(model_default, (int, float)):
        try:
            return float(stated) == float(model_default)
        except ValueError:
            return False
    if isinstance(model_default, (dict, list, tuple)):
        try:
            return json.loads(stated) == model_default
        except ValueError:
            return False
    if isinstance(model_default, Path):
        return Path(stated).expanduser() == model_default
    return stated == str(model_default)


def config_problems(readme: str) -> list[str]:
    known = env_names()
    rows = config_rows(readme)
    documented = {name.upper() for names, _ in rows for name in names}
    unknown = sorted(documented - set(known))
    problems = [f"{name} is in the configuration table but is not a setting" for name in unknown]
    fields_documented = {known[n] for n in documented if n in known}
    for field_name in Settings.model_fields:
        if field_name not in fields_documented:
            wanted = sorted(n for n, f in known.items() if f == field_name)
            problems.append(f"setting {field_name} ({' or '.join(wanted)}) is missing from the configuration table")
    for name in sorted(set(re.findall(r"\bSHOPFLOOR_[A-Z0-9_]*[A-Z0-9]", readme)) - set(known)):
        problems.append(f"{name} is mentioned in the README but is not a setting")
    for names, cell in rows:
        for name, stated in zip(names, split_defaults(cell, len(names)), strict=True):
            field_name = known.get(name.upper())
            if stated is UNSET or field_name is None:
                continue
            model_default = Settings.model_fields[field_name].get_default(call_default_factory=True)
            if not default_matches(model_default, stated):
                shown = "unset" if stated is None else f"`{stated}`"
                problems.append(f"{name}: the README says the default is {shown}, the model says {model_default!r}")
    return problems


def checked_defaults(readme: str) -> int:
    return sum(1 for names, cell in config_rows(readme) for d in split_defaults(cell, len(names)) if d is not UNSET)


# --- CLI ------------------------------------------------------------------------------------------


def is_group(command: Any) -> bool:
    """Typer builds its commands on a click it vendors: duck-type rather than isinstance."""
    return isinstance(getattr(command, "commands", None), dict)


def runs_alone(command: Any) -> bool:
    """A group that does something without a subcommand (`shopfloor bench`)."""
    return bool(getattr(command, "invoke_without_command", False))


def cli() -> Any:
    root = every_command()
    assert is_group(root)
    return root


def resolve(words: list[str]) -> tuple[Any, str]:
    """The command `shopfloor <words…>` names, and how it was written (for messages)."""
    command = cli()
    path: list[str] = []
    for word in words:
        if not is_group(command):
            break  # the rest are arguments
        sub = command.commands.get(word)
        path.append(word)
        if sub is None:
            return None, " ".join(path)
        command = sub
    return command, " ".join(path)


# `shopfloor <word> [<word>]` at the start of a line or code span, after a space or `bin/`; not
# `/shopfloor fix` (a comment command) nor `shopfloor/…` paths.
MENTION = re.compile(
    r"(?:^|(?<=[\s(])|(?<=bin/))shopfloor[ \t]+([a-z][a-z0-9-]*)(?:[ \t]+([a-z][a-z0-9-]*))?", re.MULTILINE
)


def mentioned_commands(readme: str) -> list[list[str]]:
    found = []
    for code in code_texts(readme):
        for match in MENTION.finditer(code):
            found.append([w for w in match.groups() if w])
    return found


def command_problems(readme: str) -> list[str]:
    problems = []
    for words in mentioned_commands(readme):
        command, written = resolve(words)
        if command is None:
            problems.append(f"`shopfloor {written}` is in the README but is not a command")
        elif is_group(command) and not runs_alone(command):
            problems.append(f"`shopfloor {written}` is a group: name one of {sorted(command.commands)}")
    documented: set[str] = set()
    for cells in table_rows(section(readme, "Commands")):
        for segment in re.findall(r"`([^`]+)`", cells[0]):
            words = segment.split()
            if words and words[0] == "shopfloor":
                words = words[1:]
            command, written = resolve([w for w in words if re.fullmatch(r"[a-z][a-z0-9-]*", w)][:2])
            if command is None or (is_group(command) and not runs_alone(command)):
                problems.append(f"the Commands table lists `{segment}`, which is not a command")
                continue
            documented.add(written)
            options = {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}
            for option in re.findall(r"--[a-z][a-z0-9-]*", segment):
                if option not in options:
                    problems.append(f"the Commands table gives `{written}` the option {option}, which it does not have")
    for name, command in cli().commands.items():
        subs = [*command.commands.items()] if is_group(command) else [(None, command)]
        if is_group(command) and runs_alone(command):
            subs.append((None, command))
        for sub, leaf in subs:
            full = name if sub is None else f"{name} {sub}"
            if not leaf.hidden and full not in documented:
                problems.append(f"`shopfloor {full}` is missing from the Commands table")
    return problems


# --- docs/architecture.md -------------------------------------------------------------------------


def package_modules() -> list[str]:
    """Every .py file in a package (a folder with an __init__.py, up to the root folder) of the
    five package folders, as a repo-relative path. The demo's sample repository is data: its
    folders are no packages of ours."""
    found = []
    for folder in PACKAGE_FOLDERS:
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.parent.relative_to(base)
            dirs = [base / Path(*rel.parts[:i]) for i in range(len(rel.parts) + 1)]
            if all((d / "__init__.py").is_file() for d in dirs):
                found.append(path.relative_to(ROOT).as_posix())
    return found


def _mentions(doc: str, path: str) -> bool:
    return re.search(rf"(?<![\w./-]){re.escape(path)}(?![\w/])", doc) is not None


def architecture_problems(doc: str) -> list[str]:
    modules = package_modules()
    problems = [f"{m} is not described in docs/architecture.md" for m in modules if not _mentions(doc, m)]
    folders = "|".join(PACKAGE_FOLDERS)
    named = set(re.findall(rf"(?<![\w./-])((?:{folders})/[\w/]*\.py)\b", doc))
    problems += [f"docs/architecture.md names {p}, which does not exist" for p in sorted(named - set(modules))]
    return problems


# --- the documents as they are --------------------------------------------------------------------


def test_the_parsers_find_what_they_check():
    """Guards: a parser that found nothing would make the checks below pass vacuously."""
    readme = README.read_text()
    names = [n for names, _ in config_rows(readme) for n in names]
    assert len(names) >= len(Settings.model_fields)
    assert checked_defaults(readme) >= 20
    assert len(mentioned_commands(readme)) >= 10
    assert "OPENAI_API_KEY" in env_names() and "SHOPFLOOR_MODEL" in env_names()
    assert len(package_modules()) >= 150
    assert "shopfloor/demo/sample_repo/pricing/cart.py" not in package_modules()


def test_the_configuration_table_matches_the_settings_model():
    assert config_problems(README.read_text()) == []


def test_every_command_the_readme_names_exists():
    assert command_problems(README.read_text()) == []


def test_architecture_lists_every_module():
    assert architecture_problems(ARCHITECTURE.read_text()) == []


def test_the_quickstart_keeps_its_two_lines():
    readme = README.read_text()
    # The run line ends with the demo's merged PR and timeline; .ci/run runs the test line.
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/shopfloor demo\n" in readme
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest\n" in readme


# --- the checks catch mistakes --------------------------------------------------------------------


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            "| `SHOPFLOOR_TASK_QUEUE` | `shopfloor` | task queue of workflows and activities |\n",
            "",
            "setting task_queue (SHOPFLOOR_TASK_QUEUE) is missing",
        ),
        (
            "`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`",
            "`ANTHROPIC_BASE_URL`",
            "setting anthropic_api_key (ANTHROPIC_API_KEY) is missing",
        ),
        (
            "| `SHOPFLOOR_TASK_QUEUE` |",
            "| `SHOPFLOOR_TASK_QUEUE`, `SHOPFLOOR_TASK_QUEUES` |",
            "SHOPFLOOR_TASK_QUEUES is in the configuration table but is not a setting",
        ),
        (
            "Run the tests",
            "Set `SHOPFLOOR_TEMPORAL_HOST` and run the tests",
            "SHOPFLOOR_TEMPORAL_HOST is mentioned in the README but is not a setting",
        ),
        (
            "| `7233` / `8233` |",
            "| `7233` / `8234` |",
            "SHOPFLOOR_TEMPORAL_UI_PORT: the README says the default is `8234`",
        ),
        (
            "| `SHOPFLOOR_TASK_QUEUE` | `shopfloor` |",
            "| `SHOPFLOOR_TASK_QUEUE` | `factory` |",
            "SHOPFLOOR_TASK_QUEUE: the README says the default is `factory`",
        ),
        (
            "| `SHOPFLOOR_FACTORY_PIPELINE` | `true` |",
            "| `SHOPFLOOR_FACTORY_PIPELINE` | `false` |",
            "SHOPFLOOR_FACTORY_PIPELINE: the README says the default is `false`",
        ),
        (
            "| `SHOPFLOOR_S3_ENDPOINT_URL` | unset |",
            "| `SHOPFLOOR_S3_ENDPOINT_URL` | `http://minio:9000` |",
            "SHOPFLOOR_S3_ENDPOINT_URL: the README says the default is `http://minio:9000`",
        ),
        (
            "| `SHOPFLOOR_REPOS` | `[]` |",
            '| `SHOPFLOOR_REPOS` | `["acme/shop"]` |',
            "SHOPFLOOR_REPOS: the README says the default is",
        ),
        (
            "| `SHOPFLOOR_DATA_DIR` | `~/.shopfloor` |",
            "| `SHOPFLOOR_DATA_DIR` | `/var/lib/shopfloor` |",
            "SHOPFLOOR_DATA_DIR: the README says the default is `/var/lib/shopfloor`",
        ),
    ],
)
def test_config_mistakes_are_caught(old, new, problem):
    problems = config_problems(_replace(README.read_text(), old, new))
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            "```sh\n.venv/bin/shopfloor dev\n```",
            "```sh\n.venv/bin/shopfloor show-demo\n```",
            "`shopfloor show-demo` is in the README but is not a command",
        ),
        (
            "`shopfloor run issue acme/shop#12`",
            "`shopfloor run pr acme/shop#12`",
            "`shopfloor run pr` is in the README but is not a command",
        ),
        ("| `shopfloor worker` | a worker alone |\n", "", "`shopfloor worker` is missing from the Commands table"),
        ("| `shopfloor bench webhooks", "| `shopfloor bench hooks", "the Commands table lists `shopfloor bench hooks"),
        ("`reject ID [--call C] [--reason T]`", "`reject ID [--call C] [--why T]`", "gives `reject` the option --why"),
    ],
)
def test_command_mistakes_are_caught(old, new, problem):
    problems = command_problems(_replace(README.read_text(), old, new))
    assert any(problem in p for p in problems), problems


def test_architecture_mistakes_are_caught():
    doc = ARCHITECTURE.read_text()
    assert "workflows/merge_stage.py" in doc
    dropped = doc.replace("workflows/merge_stage.py", "the merge stage")
    assert "workflows/merge_stage.py is not described in docs/architecture.md" in architecture_problems(dropped)
    stale = doc + "\n- `activities/github/teleport.py` — gone.\n"
    problem = "docs/architecture.md names activities/github/teleport.py, which does not exist"
    assert problem in architecture_problems(stale)
