"""`shopfloor demo`'s material: the sample repository it creates on the GitHub simulator
(`sample_repo/`, a small Python package with a real bug and a failing test) and the scripted
cassettes its triage, fix and review agents replay when no real model is set (`cassettes/`)."""
