"""GitHub operations as activities: PyGithub with Temporal owning retries, every write idempotent."""
