"""The version of bioanon and of its plugin API (a module of its own, so that the plugin loader and the CLI
read them without importing the package's public surface)."""

__version__ = "0.1.0"

API_VERSION = "1.12"
"""The version of the plugin API, ``"major.minor"`` (documented at :data:`bioanon.api.API_VERSION`)."""
