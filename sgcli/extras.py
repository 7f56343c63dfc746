"""Optional dependency groups ("extras") and the exit-2 message when one is missing.

The light core (sgcli without extras) lints, compiles, steps masks, runs grammar tests and converts
with llguidance, on tokenizer.json files and GGUF vocabularies (the `tokenizers` package is a core
dependency); generation, xgrammar, outlines-core and Mistral tokenizers each come with an extra.
A missing extra is the user's to fix, so it is a `UserError` naming the install command: the extra's
own requirements, read from sgcli's metadata, since `sgcli` on PyPI is another project (a 2011 curses
app) that `pip install 'sgcli[...]'` would fetch. Every
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
            hint=f"{_torch_first(extra)}{pip_extra(extra)}",
        )
        self.module = module
        self.extra = extra


def install_hint(module: str) -> str:
    """The pip command that brings `module` (an extra of sgcli where it is one)."""
    extra = EXTRA_OF_MODULE.get(module.split(".")[0])
    return f"{_torch_first(extra)}{pip_extra(extra)}" if extra else f"pip install {module}"


def pip_extra(extra: str) -> str:
    """The pip command that installs sgcli's `extra`: its requirements by name (sgcli is not on PyPI),
    or, run from a source tree that was never installed, the checkout's own extra."""
    requirements = extra_requirements(extra)
    if importlib.util.find_spec("torch") is None and extra in ("generate", "xgrammar"):
        requirements = [r for r in requirements if _normal(re.split(r"[<>=!~\[ ]", r)[0]) != "torch"]
    if not requirements:
        return f"pip install -e '.[{extra}]' in sgcli's checkout"
    return "pip install " + " ".join(f"'{r}'" for r in requirements) + f"  (sgcli's [{extra}] extra)"


def extra_requirements(extra: str) -> list[str]:
    """The requirements sgcli's metadata lists for `extra` (an extra made of extras, as [all], expanded);
    [] where sgcli is not installed."""
    found: list[str] = []
    for line in _requires():
        requirement, _, marker = line.partition(";")
        named = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        if named is None or _normal(named.group(1)) != _normal(extra):
            continue
        inner = re.fullmatch(r"\s*sgcli\s*\[([^\]]*)\]\s*", requirement)
        if inner:
            found += [r for part in inner.group(1).split(",") for r in extra_requirements(part.strip())]
        else:
            found.append(requirement.replace(" ", ""))
    return list(dict.fromkeys(found))


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
    hint = install_hint(module) if module else f"{pip_extra('all')} brings every optional package"
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
def _requires() -> tuple[str, ...]:
    """sgcli's requirements as its installed metadata lists them (pyproject.toml read back: one source)."""
    import importlib.metadata

    try:
        return tuple(importlib.metadata.requires("sgcli") or ())
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return ()


@functools.cache
def _floors() -> dict[str, str]:
    found = (re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9.]*)", line) for line in _requires())
    return {_normal(m.group(1)): m.group(2).rstrip(".") for m in found if m}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(version: str) -> tuple[int, ...]:
    """The leading release numbers of a version (0.2.9rc1 -> (0, 2, 9))."""
    return tuple(int(part) for part in re.findall(r"\d+", re.match(r"[\d.]*", version).group()))
