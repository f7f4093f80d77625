"""What a fresh interpreter imports: for the tests that keep start-up and plugin registration light."""

from __future__ import annotations

import json
import subprocess
import sys


def modules_after(code: str) -> set[str]:
    """The names in ``sys.modules`` after running ``code`` in a new Python process."""
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(out.stdout.splitlines()[-1]))
