"""The `factory_config` activity: the worker's settings that workflows may know, as a snapshot."""

from __future__ import annotations

import structlog
from temporalio import activity

from shopfloor.agents.budget import Price, find_price, price_table
from shopfloor.models.factory_config import FactoryConfig
from shopfloor.models.ledger import LIMIT_FIELDS, Limits
from shopfloor.settings import Settings

log = structlog.get_logger(__name__)


def unpriced_models(settings: Settings) -> list[str]:
    """The configured models (default and per-agent) with no price in the table settings extend."""
    table = price_table({k: Price(input_per_mtok=i, output_per_mtok=o) for k, (i, o) in settings.prices.items()})
    models = dict.fromkeys([settings.model, *settings.agent_models.values(), *settings.repo_models])
    return [m for m in models if find_price(m, table) is None]


def ledger_limits(settings: Settings, scope: str) -> Limits:
    """The operator's ledger limits of `scope` ("repo": each repository's; "total"): the settings
    `<scope>_runs_per_day` and so on."""
    return Limits(**{field: getattr(settings, f"{scope}_{field}") for field in LIMIT_FIELDS})


class FactoryConfigActivity:
    def __init__(self, settings: Settings) -> None:
        unpriced = unpriced_models(settings)
        if unpriced:
            log.warning("models without a price run without cost limits; add them to SHOPFLOOR_PRICES", models=unpriced)
        self._config = FactoryConfig(
            default_model=settings.model,
            agent_models=dict(settings.agent_models),
            repo_models=list(settings.repo_models),
            bot_login=settings.github_bot_login,
            trigger_label=settings.trigger_label,
            ui_url=settings.ui_url,
            namespace=settings.temporal_namespace,
            pipeline=settings.factory_pipeline,
            unpriced_models=unpriced,
            model_heartbeat_s=settings.model_heartbeat_seconds,
            max_tokens_unpriced=settings.max_tokens_unpriced,
            ledger=settings.ledger,
            repo_limits=ledger_limits(settings, "repo"),
            total_limits=ledger_limits(settings, "total"),
        )

    @activity.defn(name="factory_config")
    async def factory_config(self) -> FactoryConfig:
        return self._config
