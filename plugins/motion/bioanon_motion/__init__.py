"""bioanon-motion: the bioanon plugin for smartphone and wearable motion sensors."""

__version__ = "0.1.0"
