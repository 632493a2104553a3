"""The package version, in one place (setuptools reads pyproject.toml; this is what results record)."""

__version__ = "0.1.0"
