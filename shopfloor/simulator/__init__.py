"""The GitHub simulator: GitHub's REST subset, real git over smart HTTP, signed webhooks and simulated CI, offline."""
