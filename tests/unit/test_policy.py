"""`.github/shopfloor.yml`: defaults, a full valid file, and every way a file can be wrong, each
with the exact message a maintainer reads (the workflow parks and posts them)."""

from __future__ import annotations

import pytest

from shopfloor.agents.policy import PolicyLoad, RepoPolicy, is_protected, parse_policy, within_operator_bounds

pytestmark = pytest.mark.fast

FULL = """\
auto_fix: always
fixability_threshold: 0.75
require_human_approval: false
auto_merge: true
max_review_rounds: 5
budgets:
  max_cost_usd_per_run: 12.5
  max_steps: {triage: 20, fix: 150, review: 40, merge: 10}
test_command: python -m pytest -q
protected_paths: [".github/**", "*.lock", "/setup.py"]
network_for_commands: true
ci_timeout_minutes: 90
labels:
  trigger: autofix
  in_progress: "shopfloor: working"
  needs_human: needs-human
  fixed: fixed
"""


def test_no_file_means_the_defaults():
    load = parse_policy(None)
    assert load == PolicyLoad() and load.source == "default" and load.ok
    p = load.policy
    assert (p.auto_fix, p.fixability_threshold, p.require_human_approval, p.auto_merge) == ("label", 0.6, True, False)
    assert (p.max_review_rounds, p.budgets.max_cost_usd_per_run, p.test_command) == (3, 5.0, None)
    assert p.protected_paths == [".github/**", ".gitattributes", "/CODEOWNERS", "/docs/CODEOWNERS"]
    assert p.network_for_commands is False and p.ci_timeout_minutes == 60
    assert p.budgets.max_steps.fix is None and p.labels.trigger == "shopfloor" and p.labels.needs_human is None


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_an_empty_file_is_the_defaults_from_the_file(text):
    load = parse_policy(text)
    assert load.ok and load.source == "file" and load.policy == RepoPolicy()


def test_a_full_valid_file():
    load = parse_policy(FULL)
    assert load.ok and load.source == "file"
    p = load.policy
    assert (p.auto_fix, p.fixability_threshold, p.require_human_approval, p.auto_merge) == ("always", 0.75, False, True)
    assert (p.max_review_rounds, p.budgets.max_cost_usd_per_run, p.test_command) == (5, 12.5, "python -m pytest -q")
    assert p.budgets.max_steps.model_dump() == {"triage": 20, "fix": 150, "review": 40, "merge": 10}
    assert p.protected_paths == [".github/**", "*.lock", "/setup.py"]
    assert p.network_for_commands is True and p.ci_timeout_minutes == 90
    assert p.labels.model_dump() == {
        "trigger": "autofix",
        "in_progress": "shopfloor: working",
        "needs_human": "needs-human",
        "fixed": "fixed",
    }
    # Partial files keep the defaults for the rest; no cost limit is spelled null.
    partial = parse_policy("auto_fix: never\nbudgets: {max_cost_usd_per_run: null}\n")
    assert partial.ok and partial.policy.auto_fix == "never" and partial.policy.budgets.max_cost_usd_per_run is None
    assert partial.policy.max_review_rounds == 3


INVALID = [
    ("max_review_rounds: 50", "`max_review_rounds`: must be between 1 and 10 (got 50)"),
    ("max_review_rounds: 0", "`max_review_rounds`: must be between 1 and 10 (got 0)"),
    ("max_review_rounds: true", "`max_review_rounds`: must be a whole number (got true)"),
    ('max_review_rounds: "3"', '`max_review_rounds`: must be a whole number (got "3")'),
    ("fixability_threshold: 1.5", "`fixability_threshold`: must be between 0 and 1 (got 1.5)"),
    ("fixability_threshold: high", '`fixability_threshold`: must be a number (got "high")'),
    ("auto_fix: sometimes", '`auto_fix`: must be one of `never`, `label` or `always` (got "sometimes")'),
    ("require_human_approval: 1", "`require_human_approval`: must be true or false (got 1)"),
    ('auto_merge: "yes"', '`auto_merge`: must be true or false (got "yes")'),
    ("ci_timeout_minutes: 3.5", "`ci_timeout_minutes`: must be a whole number (got 3.5)"),
    ("ci_timeout_minutes: 2000", "`ci_timeout_minutes`: must be between 1 and 1440 (got 2000)"),
    (
        "budgets: {max_cost_usd_per_run: 0}",
        "`budgets.max_cost_usd_per_run`: must be more than 0 and at most 1000 (got 0)",
    ),
    ("budgets: {max_steps: {fix: 0}}", "`budgets.max_steps.fix`: must be between 1 and 500 (got 0)"),
    ("budgets: {max_steps: {triage: 1000}}", "`budgets.max_steps.triage`: must be between 1 and 200 (got 1000)"),
    ("budgets: 5", "`budgets`: must be a mapping of keys to values (got 5)"),
    ("test_command: 5", "`test_command`: must be text (got 5)"),
    ("test_command: ''", "`test_command`: must not be empty"),
    ("protected_paths: src", '`protected_paths`: must be a list (got "src")'),
    ("protected_paths: ['']", '`protected_paths.0`: "" is not a usable path pattern'),
    ("protected_paths: [a, 7]", "`protected_paths.1`: must be text (got 7)"),
    ("network_for_commands: null", "`network_for_commands`: must be true or false (got null)"),
    ("labels: {trigger: null}", "`labels.trigger`: must be text (got null)"),
    ("labels: {needs_human: ''}", "`labels.needs_human`: must not be empty"),
    ("labels: {fixed: " + "x" * 51 + "}", "`labels.fixed`: at most 50 characters"),
    ("setup: pip install .", '`setup`: must be a list (got "pip install .")'),
    ("setup: ['']", "`setup.0`: must not be empty"),
    ("setup_timeout_minutes: 500", "`setup_timeout_minutes`: must be between 1 and 120 (got 500)"),
    ("hooks: {after_edit: [fmt]}", '`hooks.after_edit.0`: must be a mapping of keys to values (got "fmt")'),
    (
        "hooks: {before_submit: [{run: lint, timeout_seconds: 0}]}",
        "`hooks.before_submit.0.timeout_seconds`: must be between 1 and 600 (got 0)",
    ),
    ("hooks: {after_edit: [{files: ['*.py']}]}", "`hooks.after_edit.0.run`: required, and missing"),
    ("models: {fix: gpt}", '`models.fix`: must be a model name such as `anthropic:claude-sonnet-4-5` (got "gpt")'),
    (
        "budgets: {max_cost_usd: {review: -1}}",
        "`budgets.max_cost_usd.review`: must be more than 0 and at most 1000 (got -1)",
    ),
    (
        "commands: {deny: ['(']}",
        '`commands.deny.0`: "(" is not a valid regular expression (missing ), unterminated subpattern at position 0)',
    ),
    ("commands: {ask: curl}", '`commands.ask`: must be a list (got "curl")'),
    ("approval_timeout_minutes: 0", "`approval_timeout_minutes`: must be between 1 and 10080 (got 0)"),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[t for t, _ in INVALID])
def test_each_invalid_value_is_named_with_its_problem(text, message):
    load = parse_policy(text + "\n")
    assert load.errors == [message]
    assert load.source == "file" and load.policy == RepoPolicy()  # the safe defaults, never half a file


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("auto_merg: true", "unknown key `auto_merg` (did you mean `auto_merge`?)"),
        ("max_review_round: 2", "unknown key `max_review_round` (did you mean `max_review_rounds`?)"),
        ("budgets: {max_step: {fix: 3}}", "unknown key `budgets.max_step` (did you mean `budgets.max_steps`?)"),
        (
            "budgets: {max_steps: {fixer: 3}}",
            "unknown key `budgets.max_steps.fixer` (did you mean `budgets.max_steps.fix`?)",
        ),
        ("labels: {trigerr: go}", "unknown key `labels.trigerr` (did you mean `labels.trigger`?)"),
        ("colour: blue", "unknown key `colour`"),
        (
            "hooks: {after_edit: [{run: fmt, file: ['*.py']}]}",
            "unknown key `hooks.after_edit.0.file` (did you mean `hooks.after_edit.0.files`?)",
        ),
        ("models: {fixer: 'a:b'}", "unknown key `models.fixer` (did you mean `models.fix`?)"),
        ("commands: {asks: []}", "unknown key `commands.asks` (did you mean `commands.ask`?)"),
    ],
)
def test_unknown_keys_are_errors_with_a_suggestion(text, message):
    assert parse_policy(text).errors == [message]


def test_every_problem_of_a_file_is_listed_and_the_whole_file_is_set_aside():
    load = parse_policy("auto_fix: always\nauto_merg: true\nmax_review_rounds: 50\n")
    assert load.errors == [
        "`max_review_rounds`: must be between 1 and 10 (got 50)",
        "unknown key `auto_merg` (did you mean `auto_merge`?)",
    ]
    assert load.policy.auto_fix == "label"  # the valid part is not applied either


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("auto_fix: [never\n", "invalid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>'"),
        (
            "auto_fix: never\n  auto_merge: true\n",
            "invalid YAML at line 2, column 13: mapping values are not allowed here",
        ),
        ("a: 1\n\tb: 2\n", "invalid YAML at line 2, column 1: found character '\\t' that cannot start any token"),
        ("auto_fix: label\nauto_fix: always\n", "invalid YAML at line 2, column 1: duplicate key `auto_fix`"),
        (
            "x: &a [1]\nprotected_paths: *a\n",
            "invalid YAML at line 2, column 18: aliases (*name) are not allowed in a policy file",
        ),
    ],
)
def test_yaml_syntax_errors_say_where(text, message):
    load = parse_policy(text)
    assert load.errors == [message] and load.policy == RepoPolicy() and load.source == "file"


@pytest.mark.parametrize(
    ("text", "got"), [("- auto_fix\n", "a list"), ("just words\n", '"just words"'), ("42\n", "42")]
)
def test_a_file_that_is_not_a_mapping(text, got):
    assert parse_policy(text).errors == [f"the file must be a mapping of keys to values (got {got})"]


def test_a_file_wrong_everywhere_lists_a_bounded_number_of_problems():
    text = "".join(f"key{i}: 1\n" for i in range(40))
    errors = parse_policy(text).errors
    assert len(errors) == 21 and errors[-1] == "... and 20 more problems"


@pytest.mark.parametrize(
    ("path", "protected"),
    [
        (".github/workflows/ci.yml", True),  # `.github/**`
        (".github", True),  # the directory itself (deleting it changes what is inside)
        ("./.github/CODEOWNERS", True),
        (".githubx/a", False),
        ("poetry.lock", True),  # `*.lock`: no slash, so any depth
        ("sub/dir/yarn.lock", True),
        ("lock", False),
        ("setup.py", True),  # `/setup.py`: anchored at the root
        ("pkg/setup.py", False),
        ("src/secrets/key.pem", True),  # `src/**/key.pem` also matches at no depth in between
        ("src/key.pem", True),
        ("srcx/key.pem", False),
        ("docs/guide/intro.md", True),  # `docs`: a directory protects everything in it
        ("migrations/0007_x.py", True),  # `migrations/000?_*.py`
        ("migrations/0010_x.py", False),
        ("db/a.sql", True),  # `[a-c]*.sql` at any depth
        ("db/d.sql", False),
        ("app/main.py", False),
        ("../outside.txt", True),  # leaving the repository is never allowed by accident
        ("", True),
    ],
)
def test_protected_path_globs(path, protected):
    policy = RepoPolicy(
        protected_paths=[
            ".github/**",
            "*.lock",
            "/setup.py",
            "src/**/key.pem",
            "docs",
            "migrations/000?_*.py",
            "[a-c]*.sql",
        ]
    )
    assert is_protected(path, policy) is protected


def test_default_protection_and_none():
    assert is_protected(".github/shopfloor.yml", RepoPolicy()) and not is_protected("src/app.py", RepoPolicy())
    assert is_protected("web/.gitattributes", RepoPolicy()) and is_protected("docs/CODEOWNERS", RepoPolicy())
    assert not is_protected(".github/workflows/ci.yml", RepoPolicy(protected_paths=[]))
    # The files that steer review and merging stay protected whatever the list says.
    for path in (
        ".github/shopfloor.yml",
        ".gitattributes",
        "a/.gitattributes",
        "CODEOWNERS",
        "docs/CODEOWNERS",
        ".github/CODEOWNERS",
    ):
        assert is_protected(path, RepoPolicy(protected_paths=[])), path
    assert not is_protected("src/CODEOWNERS", RepoPolicy(protected_paths=[]))


def test_the_repository_keys_for_setup_hooks_models_and_rules():
    load = parse_policy(
        "setup: ['python -m pip install -r requirements.txt']\n"
        "setup_timeout_minutes: 30\n"
        "hooks:\n"
        "  after_edit: [{run: python tools/fmt.py, files: ['*.py']}]\n"
        "  before_submit: [{run: ruff check ., timeout_seconds: 60}]\n"
        "models: {fix: 'openai:gpt-4.1'}\n"
        "budgets: {max_cost_usd: {fix: 2.5}}\n"
        "commands: {ask: ['^npm publish'], deny: ['^curl\\b']}\n"
        "approval_timeout_minutes: 15\n"
    )
    assert load.ok, load.errors
    p = load.policy
    assert p.setup == ["python -m pip install -r requirements.txt"] and p.setup_timeout_minutes == 30
    assert [(h.run, h.files, h.timeout_seconds) for h in p.hooks.after_edit] == [("python tools/fmt.py", ["*.py"], 120)]
    assert [(h.run, h.timeout_seconds) for h in p.hooks.before_submit] == [("ruff check .", 60)]
    assert (p.models.fix, p.models.triage, p.budgets.max_cost_usd.fix) == ("openai:gpt-4.1", None, 2.5)
    assert (p.commands.ask, p.commands.deny, p.approval_timeout_minutes) == (["^npm publish"], ["^curl\\b"], 15)
    # Absent, setup is detected (None); an empty list means no setup at all.
    assert parse_policy("").policy.setup is None and parse_policy("setup: []").policy.setup == []


def test_a_model_the_operator_does_not_offer_sets_the_whole_file_aside():
    load = parse_policy("auto_merge: true\nmodels: {fix: 'openai:gpt-4.1', review: 'anthropic:claude-x'}\n")
    assert within_operator_bounds(load, ["openai:gpt-4.1", "anthropic:claude-x"]) == load
    bounded = within_operator_bounds(load, ["openai:gpt-4.1"])
    assert bounded.errors == [
        "`models.review`: `anthropic:claude-x` is not a model this shopfloor lets repositories choose "
        "(allowed: `openai:gpt-4.1`)"
    ]
    assert bounded.policy == RepoPolicy()  # never half a file: not even auto_merge survives
    none = within_operator_bounds(parse_policy("models: {fix: 'openai:gpt-4.1'}"), [])
    assert none.errors == [
        "`models.fix`: `openai:gpt-4.1` is not a model this shopfloor lets repositories choose "
        "(its operator allows none: SHOPFLOOR_REPO_MODELS is empty)"
    ]
    broken = parse_policy("auto_merg: true")
    assert within_operator_bounds(broken, []) == broken  # its own errors stand alone


def test_code_mode_false_reaches_the_permission_judge():
    from shopfloor.agents.permissions import PermissionPolicy, classify
    from shopfloor.workflows.factory_agents import agent_permissions

    load = parse_policy("code_mode: false\n")
    assert load.ok and load.policy.code_mode is False
    rules = agent_permissions(load.policy)
    assert rules.code_mode is False
    verdict = classify("run_python", {"code": "print(1)"}, PermissionPolicy(**rules.model_dump(exclude_none=True)))
    assert verdict.decision == "deny"
    assert agent_permissions(parse_policy("").policy).code_mode is None  # the default: on
    assert not parse_policy("code_mode: sometimes\n").ok
