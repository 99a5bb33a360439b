"""URL slugs."""

import re


def slugify(title):
    """'Hello, World!' -> 'hello-world'."""
    words = re.split(r"[^a-z0-9]", title.lower())
    return "-".join(words).strip("-")
