"""Linting one file: sgcli's own readers first, then each backend, then the tokenizer rules.

Which backends judge the file: by default (`auto`) the one `generate --backend auto` would
compile it with, chosen by the same `sgcli.backends.auto.candidates`, so a lint result does
not depend on which other backends happen to be installed; `all` (or names) when asked.

Nothing heavy is loaded unless an enabled rule needs it: the structure rules need only
the file; backend rules compile against `--tokenizer`, or, without one, against a
256-token byte vocabulary (`byte_vocab`), which keeps `sgcli lint` free of model
downloads and of torch (xgrammar itself imports torch; llguidance does not).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

from sgcli.backends import check_supports, get_backend, listed_unavailable_reason, unsupported_reason
from sgcli.backends.auto import NOT_USABLE, candidates, ranked
from sgcli.backends.keyword_coverage import compiled_gaps
from sgcli.backends.matching import enforcing_backends
from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.reading import read_text
from sgcli.constraints.sources import (
    kind_from_extension,
    resolve_library,
    sniffed_kind,
    spec_from_text,
    with_subgrammars,
)
from sgcli.constraints.spec import GENERATE_WHITESPACE, ConstraintSpec, JsonOptions, Kind
from sgcli.errors import Location, UserError
from sgcli.limits import LimitHit, current_limits, run_bounded
from sgcli.lint import backend_checks as bc
from sgcli.lint.diagnostic import Diagnostic
from sgcli.lint.inputs import in_their_files, input_problem, read_grammar
from sgcli.lint.length_check import shortest_sentence, too_long
from sgcli.lint.merge import finish
from sgcli.lint.schema_checks import dialect_check, guarantee_findings
from sgcli.lint.schema_instances import Impossible
from sgcli.lint.schema_probes import keyword_probes
from sgcli.lint.select import Selection
from sgcli.tokenizers.vocab import RAW, Vocab

BYTE_VOCAB_NAME = "sgcli's 256-byte lint vocabulary"


@functools.lru_cache(maxsize=1)
def byte_vocab() -> Vocab:
    """One token per byte plus an end token: enough to compile and walk any grammar.
    One shared instance, so backends' per-vocabulary caches (compilers, tokenizers) apply."""
    tokens = [bytes([i]) for i in range(256)] + [b"<|end|>"]
    return Vocab(
        tokens,
        frozenset({256}),
        (256,),
        RAW,
        BYTE_VOCAB_NAME,
        eos_id=256,
        encode=lambda text: list(text.encode("utf-8")),
    )


@dataclass
class LintOptions:
    backend: str | tuple[str, ...] = "all"  # "all", "auto", or the backends named
    tokenizer: str | None = None
    max_tokens: int | None = None
    kind: Kind | None = None
    selection: Selection = field(default_factory=Selection.everything)
    json_options: JsonOptions = field(default_factory=lambda: JsonOptions(GENERATE_WHITESPACE))  # generate's layout
    subs: tuple[str, ...] = ()  # `--sub name=FILE` for a Lark grammar's @name references


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic]
    notes: list[str] = field(default_factory=list)  # checks that could not run, and why
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (backend, why it did not run on this file)
    missing: dict[str, str] = field(default_factory=dict)  # backend -> why it is not usable (not installed)


class Linter:
    def __init__(self, options: LintOptions):
        if options.max_tokens is not None and options.tokenizer is None:
            raise UserError(
                "--max-tokens needs --tokenizer (token counts depend on the vocabulary)",
                hint="e.g. --tokenizer default --max-tokens 64",
            )
        if options.max_tokens is not None and options.max_tokens < 1:
            raise UserError("--max-tokens must be 1 or more")
        if options.backend not in ("all", "auto"):  # asked for by name: not installed is exit 2, once
            for name in (options.backend,) if isinstance(options.backend, str) else options.backend:
                reason = listed_unavailable_reason(get_backend(name))
                if reason:
                    raise UserError(f"backend '{name}' is not usable: {reason}")
        self.options = options
        self._vocab: Vocab | None = None
        self._tokenizer_name = BYTE_VOCAB_NAME

    def vocab(self) -> Vocab:
        if self._vocab is None:
            if self.options.tokenizer is None:
                self._vocab = byte_vocab()
            else:
                from sgcli.tokenizers import load_tokenizer

                ref = None if self.options.tokenizer == "default" else self.options.tokenizer
                tokenizer = load_tokenizer(ref)
                self._vocab, self._tokenizer_name = tokenizer.vocab, tokenizer.name
        return self._vocab

    def backends(self, spec: ConstraintSpec, skipped: list[tuple[str, str]], missing: dict[str, str]) -> list[str]:
        """The backends to run where `--backend` names them or says `all`: the ones named (exit 2 if one
        cannot take this file), or every enforcing backend that supports the file's kind and JSON
        options. Those without the capability go to `skipped`, those not installed to `missing`."""

        if self.options.backend != "all":
            named = (self.options.backend,) if isinstance(self.options.backend, str) else self.options.backend
            return [check_supports(name, spec).name for name in named]
        chosen = []
        for name in enforcing_backends():
            backend = get_backend(name)
            reason, lacking = backend.unavailable_reason(), unsupported_reason(backend, spec)
            if reason:  # not installed: said once for the whole run, whatever it would lack
                missing[name] = reason
            elif lacking:
                skipped.append((name, f"it does not support {lacking}"))
            else:
                chosen.append(name)
        return chosen

    def _auto_runs(
        self, spec: ConstraintSpec, vocab: Vocab, result: FileResult, refused: list[str]
    ) -> list[bc.BackendCompile]:
        """`--backend auto`: the compile `generate` would use, chosen by the same `auto.candidates`. A
        backend it falls back from is a note, not a finding, and its name goes to `refused`; when every
        candidate fails, the first one's error is the finding (the error generate stops with) and the
        others are a note."""
        tried: list[dict] = []
        runs = []
        for backend, _, _ in candidates(spec, tried):
            run = bc.compile_with(backend.name, spec, vocab, first_mask=self.options.tokenizer is not None)
            runs.append(run)
            if run.compiled is not None:
                break
        for skip in tried:  # passed over without compiling
            if skip["reason"].startswith(NOT_USABLE):
                result.missing[skip["backend"]] = skip["reason"].removeprefix(NOT_USABLE)
            else:
                result.skipped.append((skip["backend"], f"it {skip['reason']}"))
        if not runs:
            return []
        judged, others = (runs[-1], runs[:-1]) if runs[-1].compiled is not None else (runs[0], runs[1:])
        refused += [run.name for run in runs if run.compiled is None]
        for other in others:
            where = f"generate's --backend auto would use {judged.name}" if judged.compiled else "it fails on"
            result.notes.append(
                f"{spec.name}: {where}: {other.name} rejects it ({bc.clean_message(other.error.message)})"
            )
        return [judged]

    def _lark_readers(self, spec: ConstraintSpec, runs: list, greedy: bool) -> list[str]:
        """The backends judging this file that lex Lark greedily (`greedy`: G012) or read it without a lexer
        (G006 through terminals): those that compiled it, or, where no backend rule ran, the ones
        `--backend` chooses."""
        if runs:
            names = [run.name for run in runs]
        elif self.options.backend == "auto":
            names = [backend.name for backend, _, _ in itertools.islice(candidates(spec, []), 1)]
        else:
            names = self.backends(spec, [], {})
        return [name for name in names if get_backend(name).capabilities.lexes_lark_greedily == greedy]

    def lint(self, path: str) -> FileResult:
        if path.startswith("@"):  # a grammar of the library in sgcli/grammars/
            path = resolve_library(path)
        kind = self.options.kind or kind_from_extension(path)
        text, origin = read_text(path, what=f"{kind.label} file")
        if self.options.kind is None:
            kind = sniffed_kind(kind, text)
        if kind is Kind.REGEX:
            text = text.rstrip("\n")
        spec = spec_from_text(kind, text, origin, self.options.json_options, at=Location(origin, 1, 1))
        from sgcli.constraints.spec import check_size  # --max-constraint-bytes, before any rule runs

        check_size(spec)
        return self.lint_spec(with_subgrammars(spec, list(self.options.subs)))

    def lint_spec(self, spec: ConstraintSpec) -> FileResult:
        spec = spec.for_generation()  # judged as `generate` compiles it (its escapes), not as a dry run reads
        sel = self.options.selection
        result = FileResult(spec.name, [])
        notes, skipped = result.notes, result.skipped
        found: list[Diagnostic] = []
        grammar, features, schema, stext, unreadable, structure = None, [], None, None, None, None
        if spec.kind is Kind.JSON_SCHEMA:
            spec, problem = input_problem(spec)
            if problem is not None:
                return FileResult(spec.name, finish([problem], sel), notes)
            from sgcli.constraints.jsonpos import SchemaText
            from sgcli.lint.schema_checks import pattern_features

            schema, stext = spec.schema(), SchemaText(spec.text)
            features = pattern_features(schema, stext)
        elif spec.kind in (Kind.EBNF, Kind.LARK, Kind.REGEX):
            spec, problem = input_problem(spec)
            if problem is not None:
                return FileResult(spec.name, finish([problem], sel), notes)
            grammar, features, unreadable = read_grammar(spec)
            if grammar is not None:
                from sgcli.lint.structure import Structure

                structure = Structure(grammar, spec.text, spec.name)
                found += structure.run()
        elif spec.kind is Kind.STRUCTURAL_TAG:
            spec, problem = input_problem(spec)
            if problem is not None:
                return FileResult(spec.name, finish([problem], sel), notes)

        wants_backends = (
            sel.needs("backend", schema=schema is not None)
            or (features and "R001" in sel)
            or (self.options.max_tokens is not None and "L001" in sel)
        )
        runs, refused = [], []
        if wants_backends:
            vocab = self.vocab()
            if self.options.backend == "auto":
                runs = self._auto_runs(spec, vocab, result, refused)
            else:
                runs = [
                    bc.compile_with(name, spec, vocab, first_mask=self.options.tokenizer is not None)
                    for name in self.backends(spec, skipped, result.missing)
                ]
        if structure is not None and grammar.syntax == "lark" and "G006" in sel:
            from sgcli.lint.lexerless import lexerless_repetitions

            found += lexerless_repetitions(structure, self._lark_readers(spec, runs, greedy=False))
        if structure is not None and grammar.syntax == "lark" and "G012" in sel:
            from sgcli.lint.greedy_lexemes import greedy_lexemes

            found += greedy_lexemes(structure, self._lark_readers(spec, runs, greedy=True))
        if "R001" in sel:
            verdicts = bc.feature_verdicts(runs, spec, features, self._vocab) if runs else {}
            found += bc.feature_diagnostics(spec, features, verdicts)
        said_by_j007 = dialect_of(schema).note if schema is not None else None  # not again as a backend's S002
        for run in runs:
            if run.error is not None:
                found.append(bc.compile_error(run, spec, stext))
            found += [bc.warning(run, w, spec, stext) for w in run.warnings if w.message != said_by_j007]
        if unreadable is not None and not any(d.code == "S001" for d in found):
            found.append(unreadable)
        compiled = [run.compiled for run in runs if run.compiled is not None]
        holds_schemas = schema is not None or spec.kind in (Kind.LARK, Kind.STRUCTURAL_TAG)
        chosen = self._chosen(stext, runs, spec, refused) if holds_schemas and runs else None
        if schema is not None and runs and sel.any("J001", "W002", "J003"):
            found += self._bounded_schema_rules(schema, stext, runs, spec, chosen[3] if chosen else None)
        if chosen is not None and sel.any("J004", "J005"):
            found += guarantee_findings(*chosen)
        if schema is not None and sel.any("J006", "J008"):
            from sgcli.batch.sampling import SamplingParams
            from sgcli.lint.value_budget import value_budget

            found += value_budget(schema, stext, spec.name, self.options.max_tokens or SamplingParams().max_tokens)
        if schema is not None and "J007" in sel:
            found += dialect_check(schema, stext, spec.name)
        if self.options.tokenizer is not None and grammar is not None and "T001" in sel:
            found += bc.special_token_literals(spec, grammar, self.vocab(), self._tokenizer_name)
        if self.options.max_tokens is not None and "L001" in sel:
            found += self._length(spec, grammar, schema, compiled)
        result.diagnostics = finish(in_their_files(found, spec), sel)
        return result

    def _bounded_schema_rules(self, schema, stext, runs, spec, checked: str | None) -> list[Diagnostic]:
        """The keyword probes under the compile limits, in a forked child (`run_bounded`): they build an
        instance per keyword and walk it through every matcher, which for an 88 KB schema of 2,000
        properties ran past 90 s and 4.1 GB. A limit, or a probe that fails, is a J003 finding."""
        from sgcli.lint import schema_checks as sc

        limits = current_limits()
        if not (limits.timeout_s or limits.memory_mb):
            return self._schema_rules(schema, stext, runs, spec, checked)
        probe = lambda: [d.as_dict() for d in self._schema_rules(schema, stext, runs, spec, checked)]  # noqa: E731
        try:
            found = run_bounded(probe, timeout_s=limits.timeout_s, memory_mb=limits.memory_mb)
        except LimitHit as hit:
            why = {
                "time": f"the probes ran past the {limits.timeout_s:g} s time limit (--compile-timeout)",
                "memory": f"the probes needed more than the {limits.memory_mb} MB memory limit (--compile-memory)",
            }.get(hit.kind, f"the probes stopped: {hit.detail}")
            return [sc.unprobed(spec.name, why)]
        return [_from_dict(d) for d in found]

    def _schema_rules(self, schema, stext, runs, spec, checked: str | None) -> list[Diagnostic]:
        """J001/W002 on every compile, J003 where they cannot run. A backend that refused a keyword
        (J002) is compiled again without it, so that one refusal does not hide the rest. On `checked`
        (the backend whose J004s lint reports), no J001 below a subschema sgcli's checker validates whole."""
        from sgcli.lint import schema_checks as sc

        try:
            base, probes = keyword_probes(schema)
        except Impossible as exc:
            return [sc.unprobed(spec.name, f"sgcli could not build a valid instance of the schema ({exc})")]
        out = []
        for run in runs:
            c, dropped = run.compiled, []
            if c is None and run.error is not None:
                c, dropped = bc.without_refused(run, spec, stext, self.vocab())
            if c is None:
                continue
            kept = [p for p in probes if not any(p.path[: len(d)] == d for d in dropped)]
            layouts = sc.layouts_for(c, base)
            if not layouts:
                shown = sc.dumps(base, {})[:80]
                out.append(
                    sc.unprobed(spec.name, f"{c.backend}'s matcher rejects a valid instance: {shown}", c.backend)
                )
                continue
            if "J001" in self.options.selection:
                under = _under_the_checker(c) if c.backend == checked else None
                out += sc.unenforced(c, layouts, kept, schema, stext, spec.name, dropped, under)
            if "W002" in self.options.selection and not dropped:
                caps = get_backend(c.backend).capabilities.json_options
                flags = [flag for option, flag in sc.BOUNDED_FLAGS.items() if option in caps]
                out += sc.runaway_whitespace(c, layouts[0], base, flags, spec.name)
        return out

    def _chosen(self, stext, runs, spec, auto_refused: list[str]) -> tuple | None:
        """`guarantee_findings`' arguments (J004/J005) for the backend `generate` would choose: the one named,
        or `auto`'s choice among those that compiled here (a backend lint did not run counts as compiling: its
        gaps are declared data; `auto_refused`: those auto passed over, which failed to compile)."""
        by_name = {run.name: run for run in runs}
        named = self.options.backend not in ("all", "auto")
        refused = []
        for name, gaps in ranked(spec):
            run = by_name.get(name)
            if named and run is None:
                continue
            if (run is not None and run.compiled is None) or (run is None and name in auto_refused):
                refused.append(name)
                continue
            if run is None and (unsupported_reason(get_backend(name), spec) or not _listed_usable(name)):
                continue
            if run is not None:
                gaps = compiled_gaps(run.compiled)
            why = (
                ""
                if named
                else f" (generate would use {name}"
                + (f": {', '.join(refused)} refused {'the schema' if stext else 'it'})" if refused else ")")
            )
            return gaps, stext, spec.name, name, why
        return None

    def _length(self, spec, grammar, schema, compiled) -> list[Diagnostic]:
        sentence = shortest_sentence(grammar, schema, spec.kind is Kind.JSON_SCHEMA)
        if sentence is None:
            return []
        root = grammar.definitions().get(grammar.root) if grammar is not None else None
        return too_long(
            spec,
            sentence,
            self.vocab(),
            compiled,
            self.options.max_tokens,
            self._tokenizer_name,
            (root.pos, root.pos + len(root.name)) if root is not None and grammar.syntax != "regex" else None,
        )


def _from_dict(d: dict) -> Diagnostic:
    """A Diagnostic back from `Diagnostic.as_dict` (across the probe child's pipe)."""
    fields = ("code", "message", "path", "line", "col", "end_line", "end_col", "hint", "backend", "severity")
    return Diagnostic(**{k: d[k] for k in fields}, notes=tuple(d["notes"]))


def _listed_usable(name: str) -> bool:
    """Whether the backend's library is installed, without importing it (xgrammar imports torch)."""
    return listed_unavailable_reason(get_backend(name)) is None


def _under_the_checker(compiled):
    """Whether a keyword (by schema path) lies in a subschema sgcli's checker validates whole for `compiled`
    (a J004 gap's anchor), and is not a gap's keyword itself (whose J001 folds into its J004 as the
    evidence): its matcher refuses what breaks it there, so a J001 ("silently ignored") was false: four
    stood under the J004 of an `allOf` on xgrammar (2026-12-06)."""
    from sgcli.backends.keyword_coverage import compiled_gaps
    from sgcli.constraints.jsonpos import pointer_parts

    gaps = [g for g in compiled_gaps(compiled) if g.checker]
    keywords = {tuple(pointer_parts(g.pointer)) for g in gaps}
    anchors = {tuple(pointer_parts(a)) for g in gaps for a in g.anchors}
    return lambda path: path not in keywords and any(path[: len(a)] == a for a in anchors)
