"""Which model each factory agent gets, and the snapshot workflows receive of the settings."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.factory_config import FactoryConfigActivity
from shopfloor.models.factory_config import FactoryConfig
from shopfloor.models.ledger import Limits
from shopfloor.settings import Settings

pytestmark = pytest.mark.fast


def test_the_most_specific_model_wins():
    config = FactoryConfig(default_model="openai:base", agent_models={"review": "openai:r", "review-2": "scripted:r2"})
    assert config.model_for("review", 1) == "openai:r"
    assert config.model_for("review", 2) == "scripted:r2"
    assert config.model_for("review") == "openai:r"
    assert config.model_for("fix", 3) == "openai:base"


@pytest.mark.parametrize(
    ("operator", "repo", "cap"),
    [(None, None, None), (5000, None, 5000), (None, 800, 800), (5000, 800, 800), (700, 800, 700)],
)
def test_a_model_with_no_price_gets_the_lower_token_limit_or_none(operator, repo, cap):
    assert FactoryConfig(max_tokens_unpriced=operator).unpriced_token_cap(repo) == cap


def test_no_token_limit_names_who_can_set_one():
    why = FactoryConfig.no_token_limit("openai:local")
    assert why.startswith("`openai:local` has no price") and "SHOPFLOOR_MAX_TOKENS_UNPRICED" in why
    assert "budgets.max_tokens" in why
    assert "budgets.max_tokens" not in FactoryConfig.no_token_limit("openai:local", repo_may_set=False)


async def test_the_activity_hands_out_settings_without_secrets(tmp_path):
    settings = Settings(
        data_dir=tmp_path,
        model="openai:m",
        agent_models={"fix": "anthropic:f"},
        temporal_ui_port=9999,
        github_token=SecretStr("ghp_secret"),
        openai_api_key=SecretStr("sk-secret"),
        trigger_label="go",
    )
    config = await ActivityEnvironment().run(FactoryConfigActivity(settings).factory_config)
    assert config.model_for("fix") == "anthropic:f" and config.model_for("triage") == "openai:m"
    assert config.trigger_label == "go" and config.bot_login == "shopfloor[bot]"
    assert config.workflow_url("issue/a/b/1") == "http://localhost:9999/namespaces/default/workflows/issue%2Fa%2Fb%2F1"
    dumped = config.model_dump_json()
    assert "secret" not in dumped


async def test_models_without_a_price_are_named_so_runs_skip_the_cost_limit(tmp_path):
    settings = Settings(
        data_dir=tmp_path,
        model="openai:my-local-llama",
        agent_models={"fix": "anthropic:claude-sonnet-4-5", "review": "openai:other-local", "triage": "scripted:t"},
        prices={"other-local": (0.5, 1.0)},
        model_heartbeat_seconds=7,
    )
    config = await ActivityEnvironment().run(FactoryConfigActivity(settings).factory_config)
    assert config.unpriced_models == ["openai:my-local-llama"]
    assert not config.is_priced(config.model_for("triage-x")) and config.is_priced(config.model_for("fix"))
    assert config.is_priced(config.model_for("review")) and config.is_priced(config.model_for("triage"))
    assert config.model_heartbeat_s == 7


async def test_the_ledger_limits_and_the_unpriced_token_cap_reach_the_workflows(tmp_path):
    settings = Settings(
        data_dir=tmp_path,
        repo_runs_per_day=2,
        repo_cost_usd_per_month=30.0,
        total_max_running=5,
        max_tokens_unpriced=200_000,
    )
    config = await ActivityEnvironment().run(FactoryConfigActivity(settings).factory_config)
    assert config.repo_limits == Limits(runs_per_day=2, cost_usd_per_month=30.0)
    assert config.total_limits == Limits(max_running=5) and config.max_tokens_unpriced == 200_000
    assert not config.ledger and config.repo_limits.set_any()
    bare = await ActivityEnvironment().run(FactoryConfigActivity(Settings(data_dir=tmp_path)).factory_config)
    assert not (bare.repo_limits.set_any() or bare.total_limits.set_any())  # no ledger unless asked for


async def test_without_a_real_model_dev_gives_triage_the_no_model_script_and_it_is_a_valid_triage(tmp_path):
    from shopfloor.activities.providers.scripted import load_cassette
    from shopfloor.agents.outputs import TriageResult
    from shopfloor.cli.dev import with_no_model_triage
    from shopfloor.models.factory_config import NO_MODEL_TRIAGE

    unset = with_no_model_triage(Settings(data_dir=tmp_path, model="scripted:explore-demo", agent_models={}))
    default = await ActivityEnvironment().run(FactoryConfigActivity(unset).factory_config)
    assert default.model_for("triage") == NO_MODEL_TRIAGE and default.triage_has_no_model
    assert default.model_for("fix") == "scripted:explore-demo"
    for chosen in (
        Settings(data_dir=tmp_path, model="openai:m"),
        Settings(data_dir=tmp_path, agent_models={"triage": "scripted:t"}),
    ):
        assert with_no_model_triage(chosen) is chosen
    _, cassette = load_cassette(NO_MODEL_TRIAGE.removeprefix("scripted:"))
    (turn,) = cassette.turns
    (submit,) = turn.tool_calls
    triage = TriageResult.model_validate(submit.arguments)
    assert triage.fixability == 0.0 and "SHOPFLOOR_MODEL" in triage.summary


def test_shopfloor_dev_says_what_is_missing_about_its_model(tmp_path):
    from shopfloor.cli.dev import model_warnings

    (note,) = model_warnings(Settings(data_dir=tmp_path, model="scripted:explore-demo", agent_models={}))
    assert model_warnings(
        Settings(data_dir=tmp_path, model="scripted:explore-demo", agent_models={"triage": "scripted:no-model-triage"})
    ) == [note]
    assert "no real model is configured" in note and "SHOPFLOOR_MODEL" in note
    keyless = {"openai_api_key": None, "openai_base_url": None}
    (warning,) = model_warnings(
        Settings(data_dir=tmp_path, model="openai:gpt-x", agent_models={"fix": "scripted:x"}, **keyless)
    )
    assert "openai:gpt-x needs OPENAI_API_KEY" in warning and "where the worker runs" in warning
    keyed = Settings(data_dir=tmp_path, model="openai:gpt-x", openai_api_key=SecretStr("sk-x"))
    assert model_warnings(keyed) == []
