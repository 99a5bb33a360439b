"""Real git for the simulator: bare repositories driven by the git CLI, merges like GitHub's button, smart HTTP."""
