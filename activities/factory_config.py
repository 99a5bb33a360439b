"""The `factory_config` activity: the worker's settings that workflows may know, as a snapshot."""

from __future__ import annotations

from temporalio import activity

from shopfloor.models.factory_config import FactoryConfig
from shopfloor.settings import Settings


class FactoryConfigActivity:
    def __init__(self, settings: Settings) -> None:
        self._config = FactoryConfig(
            default_model=settings.model,
            agent_models=dict(settings.agent_models),
            bot_login=settings.github_bot_login,
            trigger_label=settings.trigger_label,
            ui_url=settings.ui_url,
            namespace=settings.temporal_namespace,
            pipeline=settings.factory_pipeline,
        )

    @activity.defn(name="factory_config")
    async def factory_config(self) -> FactoryConfig:
        return self._config
