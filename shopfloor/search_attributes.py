"""The search attributes shopfloor sets on its workflows, and their registration."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

SHOPFLOOR_REPO = SearchAttributeKey.for_keyword("ShopfloorRepo")
SHOPFLOOR_ISSUE = SearchAttributeKey.for_int("ShopfloorIssue")
SHOPFLOOR_STAGE = SearchAttributeKey.for_keyword("ShopfloorStage")
SHOPFLOOR_AGENT = SearchAttributeKey.for_keyword("ShopfloorAgent")

ALL_KEYS: tuple[SearchAttributeKey, ...] = (SHOPFLOOR_REPO, SHOPFLOOR_ISSUE, SHOPFLOOR_STAGE, SHOPFLOOR_AGENT)
