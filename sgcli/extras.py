"""Optional dependency groups ("extras") and the exit-2 message when one is missing.

The light core (`pip install sgcli`) lints, compiles, steps masks, runs grammar tests and converts
with llguidance, on tokenizer.json files and GGUF vocabularies (the `tokenizers` package is a core
dependency); generation, xgrammar, outlines-core and Mistral tokenizers each come with an extra.
A missing extra is the user's to fix, so it is a `UserError` naming the install command. Every
ImportError of an optional module goes through here: `require` before the work starts,
`import_failure` where an import fails, and `cli.common.handles_errors` for any that escapes.
"""

from __future__ import annotations

import functools
import importlib.util
import re

from sgcli.errors import UserError

# Top-level module -> the extra that installs it.
EXTRA_OF_MODULE = {
    "torch": "generate",
    "transformers": "generate",
    "safetensors": "generate",
    "gguf": "generate",
    "accelerate": "generate",
    "jinja2": "generate",
    "huggingface_hub": "generate",
    "xgrammar": "xgrammar",
    "outlines_core": "outlines",
    "mistral_common": "mistral",
    "httpx": "serve",
    "sentencepiece": "mistral",
    "matplotlib": "bench",
}


class MissingExtra(UserError):
    """An optional dependency is not installed: say which extra brings it."""

    def __init__(self, module: str, extra: str, what: str | None = None):
        need = f"{what} needs" if what else "this command needs"
        super().__init__(
            f"{need} the Python package '{module}', which is not installed",
            hint=f"{_torch_first(extra)}pip install 'sgcli[{extra}]'  (or 'sgcli[all]')",
        )
        self.module = module
        self.extra = extra


def install_hint(module: str) -> str:
    """The pip command that brings `module` (an extra of sgcli where it is one)."""
    extra = EXTRA_OF_MODULE.get(module.split(".")[0])
    return f"{_torch_first(extra)}pip install 'sgcli[{extra}]'" if extra else f"pip install {module}"


def _torch_first(extra: str | None) -> str:
    """These extras need torch (xgrammar requires it too), and pip's default torch is the CUDA build with
    gigabytes of GPU libraries: the build for the machine goes first."""
    if extra not in ("generate", "xgrammar") or importlib.util.find_spec("torch") is not None:
        return ""
    cpu = "--index-url https://download.pytorch.org/whl/cpu"
    return f"pip install torch (the build for this machine first; CPU only: {cpu}), then "


def require(extra: str, what: str) -> None:
    """Raise `MissingExtra` unless every module of `extra` can be imported (without importing it)."""
    for module, group in EXTRA_OF_MODULE.items():
        if group == extra and importlib.util.find_spec(module) is None:
            raise MissingExtra(module, extra, what)


def import_failure(exc: ImportError, what: str) -> UserError:
    """The user-facing error for an import that failed while doing `what`: `MissingExtra` for an
    optional module, else the pip command that brings the module (a damaged install)."""
    missing = from_import_error(exc, what)
    if missing is not None:
        return missing
    module = getattr(exc, "name", None)
    hint = install_hint(module) if module else "pip install 'sgcli[all]' brings every optional package"
    return UserError(f"{what} cannot import {module or 'what it needs'}: {exc}", hint=hint)


def from_import_error(exc: ImportError, what: str | None = None) -> MissingExtra | None:
    """The user-facing error for an ImportError of an optional module (`what` needs it), or None if it is
    not one."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(name)
    return MissingExtra(name, extra, what) if extra else None


def too_old(distribution: str, installed: str) -> str | None:
    """Why `installed` of `distribution` is below the floor sgcli declares for it (pyproject.toml, read back
    from sgcli's own metadata: one source), or None. A library installed with `pip install --no-deps`, as
    the README's CPU recipe for xgrammar does, skips the floor pip would have enforced."""
    floor = _floors().get(_normal(distribution))
    if floor is None or _release(installed) >= _release(floor):
        return None
    return (
        f"{distribution} {installed} is older than the {floor} sgcli needs (older releases fail its conformance "
        f"tests); pip install '{distribution}>={floor}'"
    )


@functools.cache
def _floors() -> dict[str, str]:
    import importlib.metadata

    try:
        requires = importlib.metadata.requires("sgcli") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return {}
    found = (re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9.]*)", line) for line in requires)
    return {_normal(m.group(1)): m.group(2).rstrip(".") for m in found if m}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(version: str) -> tuple[int, ...]:
    """The leading release numbers of a version (0.2.9rc1 -> (0, 2, 9))."""
    return tuple(int(part) for part in re.findall(r"\d+", re.match(r"[\d.]*", version).group()))
