"""The FastAPI edge: verify, dedupe, route. Never does work inline."""
