"""Deterministic orchestration only: every side effect is an activity (shopfloor.activities)."""
