"""Pydantic models shared across the layers: the contracts of workflows, activities and providers."""
