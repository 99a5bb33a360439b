"""Which model each factory agent gets, and the snapshot workflows receive of the settings."""

from __future__ import annotations

from pydantic import SecretStr
from temporalio.testing import ActivityEnvironment

from shopfloor.activities.factory_config import FactoryConfigActivity
from shopfloor.models.factory_config import FactoryConfig
from shopfloor.settings import Settings


def test_the_most_specific_model_wins():
    config = FactoryConfig(default_model="openai:base", agent_models={"review": "openai:r", "review-2": "scripted:r2"})
    assert config.model_for("review", 1) == "openai:r"
    assert config.model_for("review", 2) == "scripted:r2"
    assert config.model_for("review") == "openai:r"
    assert config.model_for("fix", 3) == "openai:base"


async def test_the_activity_hands_out_settings_without_secrets(tmp_path):
    settings = Settings(
        data_dir=tmp_path, model="openai:m", agent_models={"fix": "anthropic:f"}, temporal_ui_port=9999,
        github_token=SecretStr("ghp_secret"), openai_api_key=SecretStr("sk-secret"), trigger_label="go",
    )
    config = await ActivityEnvironment().run(FactoryConfigActivity(settings).factory_config)
    assert config.model_for("fix") == "anthropic:f" and config.model_for("triage") == "openai:m"
    assert config.trigger_label == "go" and config.bot_login == "shopfloor[bot]"
    assert config.workflow_url("issue/a/b/1") == "http://localhost:9999/namespaces/default/workflows/issue%2Fa%2Fb%2F1"
    dumped = config.model_dump_json()
    assert "secret" not in dumped
