"""GitHub-shaped JSON for the simulator's objects, every URL built from its own base URL."""
