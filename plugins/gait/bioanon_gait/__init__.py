"""bioanon-gait: the bioanon plugin for 3-D skeleton and marker gait sequences."""

__version__ = "0.1.0"
