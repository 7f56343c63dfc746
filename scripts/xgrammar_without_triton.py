"""Install sgcli's xgrammar extra without triton, on a machine without CUDA (run by `make setup`).

xgrammar's metadata requires triton on Linux x86_64 (~1 GB installed), which it imports only to
apply a bitmask to CUDA logits (`xgrammar/kernels/apply_token_bitmask_inplace_triton.py`; CPU
logits take its CPU kernel, and sgcli applies masks itself). So xgrammar goes in with --no-deps,
then every other requirement its own metadata states (markers evaluated for this machine, so a
new requirement of a later release is not missed). `import xgrammar` is left to the tests: it
imports torch and transformers, 8-17 s on a busy two-core machine.

    .venv/bin/python scripts/xgrammar_without_triton.py [pip install options...]

The pip install options (e.g. -q) are passed to both installs. `pip install 'sgcli[xgrammar]'`
itself stays as it is: pyproject states xgrammar's requirements honestly, triton included.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED = {"triton"}  # CUDA-only


def extra_requirements(extra: str) -> list[str]:
    """The requirements pyproject.toml lists under `[project.optional-dependencies] extra`."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from pip._vendor import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project["optional-dependencies"][extra])


def requirements_of(dist: str, skipped=frozenset(SKIPPED)) -> list[str]:
    """What the installed distribution `dist` requires on this machine (no extras of its own), minus `skipped`."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # packaging comes with transformers; pip always vendors one
        from pip._vendor.packaging.requirements import Requirement

    wanted = []
    for line in importlib.metadata.requires(dist) or []:
        req = Requirement(line)
        if req.name.lower() in skipped or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        wanted.append(f"{req.name}{extras}{req.specifier}")
    return wanted


def main(pip_options: list[str]) -> None:
    pip = [sys.executable, "-m", "pip", "install", *pip_options]
    subprocess.run([*pip, "--no-deps", *extra_requirements("xgrammar")], check=True)
    needed = requirements_of("xgrammar")
    if needed:
        subprocess.run([*pip, *needed], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
