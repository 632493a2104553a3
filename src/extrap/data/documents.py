"""A corpus document: (key, raw bytes). The key names its source (a path, or an archive member)."""

Document = tuple[str, bytes]
