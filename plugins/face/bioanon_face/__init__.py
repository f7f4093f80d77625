"""bioanon-face: the bioanon plugin for face images."""

__version__ = "0.1.0"
