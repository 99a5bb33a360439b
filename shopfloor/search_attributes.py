"""The search attributes shopfloor sets on its workflows, and their registration."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

SHOPFLOOR_REPO = SearchAttributeKey.for_keyword("ShopfloorRepo")
SHOPFLOOR_ISSUE = SearchAttributeKey.for_int("ShopfloorIssue")
SHOPFLOOR_STAGE = SearchAttributeKey.for_keyword("ShopfloorStage")
SHOPFLOOR_AGENT = SearchAttributeKey.for_keyword("ShopfloorAgent")
# What an issue's or pull request's run has spent so far, in USD: a column for the UI's list.
SHOPFLOOR_COST = SearchAttributeKey.for_float("ShopfloorCostUsd")

ALL_KEYS: tuple[SearchAttributeKey, ...] = (
    SHOPFLOOR_REPO,
    SHOPFLOOR_ISSUE,
    SHOPFLOOR_STAGE,
    SHOPFLOOR_AGENT,
    SHOPFLOOR_COST,
)
