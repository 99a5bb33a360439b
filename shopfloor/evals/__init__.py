"""Measuring the factory (`shopfloor eval`): task suites, scoring, reports and comparisons."""
