"""The GitHub simulator: GitHub\x27s REST subset, real git over smart HTTP, signed webhooks and simulated CI, offline."""
