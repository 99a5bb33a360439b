"""Every side effect of the factory: model calls, tools, workspaces, GitHub writes."""
