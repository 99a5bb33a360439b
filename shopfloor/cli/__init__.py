"""The `shopfloor` command line."""
