"""bioanon-example: a minimal third-party bioanon plugin (copy this folder to start your own)."""

__version__ = "0.1.0"
