"""bioanon-voice: the bioanon plugin for speech."""

__version__ = "0.1.0"
