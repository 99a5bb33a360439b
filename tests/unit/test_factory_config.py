"""Which model each factory agent gets, and the snapshot workflows receive of the settings."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.factory_config import FactoryConfigActivity
from shopfloor.models.factory_config import FactoryConfig
from shopfloor.settings import Settings

pytestmark = pytest.mark.fast


def test_the_most_specific_model_wins():
    config = FactoryConfig(default_model="openai:base", agent_models={"review": "openai:r", "review-2": "scripted:r2"})
    assert config.model_for("review", 1) == "openai:r"
    assert config.model_for("review", 2) == "scripted:r2"
    assert config.model_for("review") == "openai:r"
    assert config.model_for("fix", 3) == "openai:base"


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
