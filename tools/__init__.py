"""Developer tools run from the repository root (python tools/NAME.py); importable as ``tools`` there."""
