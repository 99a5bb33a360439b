"""Pure agent definitions and loop rules: prompts, tool sets, limits. No I/O here."""
