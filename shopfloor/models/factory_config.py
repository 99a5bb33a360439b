"""What the factory workflows need to know of the worker's settings, fetched by one activity.

Workflows never read settings (they must replay anywhere); the `factory_config` activity hands
them this snapshot once per run, and history keeps it, so a replay sees the same values. No
secrets: models are "provider:model" names, never keys.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from shopfloor.models.ledger import Limits

# With no real model configured, the factory's triage runs this built-in script: it says so on the
# issue and the run parks for a person, instead of failing on the explore agent's script.
NO_MODEL_TRIAGE = "scripted:no-model-triage"


class FactoryConfig(BaseModel):
    default_model: str = "scripted:explore-demo"
    agent_models: dict[str, str] = Field(default_factory=dict)
    repo_models: list[str] = Field(default_factory=list)  # what a repository's `models:` may name
    bot_login: str = "shopfloor[bot]"
    trigger_label: str = "shopfloor"
    ui_url: str = ""  # Temporal UI base, for links in progress comments
    namespace: str = "default"
    pipeline: bool = True  # False: IssueWorkflow is an event inbox only (no agents run)
    # Configured models with no known price: their runs cannot enforce a cost limit, so the
    # factory runs them under the step limits alone and says so (rather than not at all).
    unpriced_models: list[str] = Field(default_factory=list)
    model_heartbeat_s: float = 30.0
    max_tokens_unpriced: int | None = None  # the token cap of an agent run on an unpriced model
    ledger: bool = False  # count every run in the ledger, even with no limit set
    repo_limits: Limits = Field(default_factory=Limits)  # the operator's, for each repository
    total_limits: Limits = Field(default_factory=Limits)

    def model_for(self, agent: str, round_: int | None = None) -> str:
        """The model for one agent run: "<agent>-<round>", then "<agent>", then the default."""
        if round_ is not None and (chosen := self.agent_models.get(f"{agent}-{round_}")):
            return chosen
        return self.agent_models.get(agent) or self.default_model

    @property
    def triage_has_no_model(self) -> bool:
        return self.model_for("triage") == NO_MODEL_TRIAGE

    def is_priced(self, model: str) -> bool:
        return model not in self.unpriced_models

    def unpriced_token_cap(self, repo_cap: int | None) -> int | None:
        """The token limit of a run on a model with no price, which no cost limit can hold: the
        lower of the operator's and the repository's (`repo_cap`); None when neither is set, and
        then it must not start (see `no_token_limit`)."""
        caps = [t for t in (repo_cap, self.max_tokens_unpriced) if t is not None]
        return min(caps) if caps else None

    @staticmethod
    def no_token_limit(model: str, *, repo_may_set: bool = True) -> str:
        """Why a run on unpriced `model` did not start, naming who can set a limit."""
        who = "the operator sets SHOPFLOOR_MAX_TOKENS_UNPRICED (or a price in SHOPFLOOR_PRICES)"
        if repo_may_set:
            who += ", or the repository `budgets.max_tokens` in .github/shopfloor.yml"
        return f"`{model}` has no price, so no cost limit can hold it, and no token limit is set: {who}"

    def workflow_url(self, workflow_id: str) -> str:
        from urllib.parse import quote

        if not self.ui_url:
            return ""
        return f"{self.ui_url}/namespaces/{self.namespace}/workflows/{quote(workflow_id, safe='')}"
