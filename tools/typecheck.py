"""Type-check bioanon with mypy: the core strictly, the plugins with mypy's default checks.

The packages live under names other than their import names (``core/`` is ``bioanon``), which mypy cannot
follow through an editable install, so this script links them under their import names in ``.mypy_shim/``
(git-ignored), runs mypy there with the settings of ``[tool.mypy]`` in pyproject.toml, and prints the
findings with the repository's own paths. Exit status: mypy's.

    python tools/typecheck.py            # everything
    python tools/typecheck.py bioanon    # one package
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "bioanon": ROOT / "core",
    "bioanon_face": ROOT / "plugins/face/bioanon_face",
    "bioanon_gait": ROOT / "plugins/gait/bioanon_gait",
    "bioanon_voice": ROOT / "plugins/voice/bioanon_voice",
    "bioanon_motion": ROOT / "plugins/motion/bioanon_motion",
    "bioanon_example": ROOT / "examples/plugin-template/bioanon_example",
}


def _shim() -> Path:
    shim = ROOT / ".mypy_shim"
    shim.mkdir(exist_ok=True)
    for name, target in PACKAGES.items():
        link = shim / name
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return shim


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or list(PACKAGES)
    unknown = sorted(set(names) - set(PACKAGES))
    if unknown:
        print(f"typecheck: unknown package(s) {unknown}; choose from {sorted(PACKAGES)}", file=sys.stderr)
        return 2
    shim = _shim()
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".mypy_cache"),
    ]
    for name in names:
        command += ["-p", name]
    done = subprocess.run(command, cwd=shim, capture_output=True, text=True)
    pattern = re.compile(r"^(" + "|".join(map(re.escape, PACKAGES)) + r")/", re.MULTILINE)

    def real(match: re.Match[str]) -> str:
        return str(PACKAGES[match.group(1)].relative_to(ROOT)) + "/"

    sys.stdout.write(pattern.sub(real, done.stdout))
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
