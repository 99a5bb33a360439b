"""Agent tools: the code behind each tool an agent may call, confined to its workspace."""
