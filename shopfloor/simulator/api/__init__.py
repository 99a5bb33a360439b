"""The simulator's REST API under /api/v3: one router per resource, in GitHub's own shapes."""
