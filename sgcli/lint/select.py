"""`--select` / `--ignore` with ruff's semantics.

A selector is `ALL`, a family letter (`G`), a code prefix (`G00`) or a full code
(`G001`). A rule runs when some `--select` selector matches it and no `--ignore`
selector matches it more specifically or equally: `--select G --ignore G002` runs every
G rule but G002; `--ignore G --select G002` still runs G002 (the longer match wins).
Without `--select`, every rule is selected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sgcli.errors import UserError, did_you_mean
from sgcli.lint.rules import RULES, SCHEMA_ONLY


def _split(values: list[str] | None) -> list[str]:
    out = []
    for value in values or []:
        out.extend(v.strip().upper() for v in value.split(",") if v.strip())
    return out


def unknown_selector(value: str) -> str | None:
    """Why one --select/--ignore value (comma-separated selectors) selects nothing, or None: shared by the
    flags, the configuration file and SGCLI_LINT_SELECT/IGNORE (each checked where it is read)."""
    for s in _split([value]):
        if s != "ALL" and not any(code.startswith(s) for code in RULES):
            return f"no rule code starts with '{s}'." + did_you_mean(s, [*RULES, *{c[0] for c in RULES}])
    return None


def _check(selectors: list[str], flag: str) -> None:
    for s in selectors:
        why = unknown_selector(s)
        if why is not None:
            raise UserError(f"{flag} {s}: {why}", hint="see `sgcli rule --all` for the codes")


def _specificity(selectors: list[str], code: str) -> int:
    """Length of the longest selector matching `code` (ALL counts 0); -1 when none does."""
    best = -1
    for s in selectors:
        if s == "ALL":
            best = max(best, 0)
        elif code.startswith(s):
            best = max(best, len(s))
    return best


@dataclass(frozen=True)
class Selection:
    enabled: frozenset[str]

    @classmethod
    def parse(cls, select: list[str] | None, ignore: list[str] | None) -> Selection:
        chosen, dropped = _split(select) or ["ALL"], _split(ignore)
        _check(chosen, "--select")
        _check(dropped, "--ignore")
        enabled = set()
        for code in RULES:
            picked, ignored = _specificity(chosen, code), _specificity(dropped, code)
            if picked >= 0 and picked > ignored:
                enabled.add(code)
        return cls(frozenset(enabled))

    @classmethod
    def everything(cls) -> Selection:
        return cls(frozenset(RULES))

    def __contains__(self, code: str) -> bool:
        return code in self.enabled

    def any(self, *codes: str) -> bool:
        return any(c in self.enabled for c in codes)

    def needs(self, requirement: str, *, schema: bool = True) -> bool:
        """Whether any enabled rule needs `requirement` ("backend", "tokenizer"); with
        `schema=False` (a grammar or regex file), rules that only judge schemas do not count."""
        return any(RULES[c].needs == requirement for c in self.enabled if schema or c not in SCHEMA_ONLY)


@dataclass(frozen=True)
class PerFileIgnores:
    """`per-file-ignores` from the configuration: glob -> selectors skipped in matching files.

    Globs match the path as given on the command line, or relative to the configuration
    file's folder (as ruff resolves them)."""

    patterns: tuple[tuple[str, tuple[str, ...]], ...] = ()
    base: str | None = None

    @classmethod
    def parse(cls, table: dict[str, list[str]] | None, base: str | None) -> PerFileIgnores:
        pairs = []
        for glob, codes in (table or {}).items():
            selectors = _split(codes)
            _check(selectors, f"per-file-ignores {glob!r}:")
            pairs.append((glob, tuple(selectors)))
        return cls(tuple(pairs), base)

    def ignores(self, path: str, code: str) -> bool:
        import fnmatch
        import os

        candidates = {path}
        if self.base:
            candidates.add(os.path.relpath(os.path.abspath(path), self.base))
        return any(
            _specificity(list(selectors), code) >= 0
            for glob, selectors in self.patterns
            if any(fnmatch.fnmatch(c, glob) for c in candidates)
        )


_NOQA = re.compile(r"(?:#|//)\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]*(?:\s*,\s*[A-Za-z]+[0-9]*)*))?", re.IGNORECASE)


def noqa_codes(line: str) -> frozenset[str] | None:
    """The rule selectors a `# noqa: G001, W` (GBNF/EBNF) or `// noqa: G001` (Lark) comment
    silences on its line; an empty set means every rule (a bare `noqa`), None means no comment."""
    match = _NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    return frozenset(_split([codes])) if codes else frozenset()


def silenced_by_noqa(code: str, line: str) -> bool:
    codes = noqa_codes(line)
    return codes is not None and (not codes or _specificity(list(codes), code) >= 0)
