"""xgrammar adapter: the default backend (as in SGLang)."""

from __future__ import annotations

import json
import time

import numpy as np

from sgcli.backends.base import Capabilities, Compiled, CompileWarning
from sgcli.backends.diagnostics import grammar_error, strip_log_prefix
from sgcli.backends.native_stderr import capture_fd2
from sgcli.spec import ConstraintSpec, Kind
from sgcli.tokenizers.vocab import Vocab


class XGrammarMatcher:
    def __init__(self, handle, vocab_size: int):
        import xgrammar as xgr

        self._m = xgr.GrammarMatcher(handle)
        self._words = (vocab_size + 31) // 32
        self.error: str | None = None

    def fill_mask(self, bitmask: np.ndarray) -> None:
        self._m.fill_next_token_bitmask(bitmask.reshape(1, self._words))

    def accept(self, token_id: int) -> bool:
        ok = self._m.accept_token(token_id)
        if not ok:
            self.error = f"token {token_id} is not allowed by the grammar here"
        return ok

    def rollback(self, n: int) -> None:
        self._m.rollback(n)

    def jump_forward(self) -> bytes:
        return self._m.find_jump_forward_string().encode("utf-8")

    def is_terminated(self) -> bool:
        return self._m.is_terminated()

    def can_stop(self) -> bool:
        return self._m.is_completed()


class XGrammarBackend:
    name = "xgrammar"
    description = "xgrammar: pushdown automaton with precomputed token masks (SGLang's default)"
    capabilities = Capabilities(
        kinds=frozenset({Kind.JSON_SCHEMA, Kind.REGEX, Kind.EBNF, Kind.LARK, Kind.CHOICE, Kind.STRUCTURAL_TAG}),
        json_options=frozenset({"compact", "indent", "max_whitespace", "strict_properties"}),
        notes="EBNF in xgrammar's GBNF dialect; no custom whitespace pattern",
    )

    def __init__(self):
        self._compilers: dict[int, tuple[Vocab, object]] = {}

    def available(self) -> str | None:
        try:
            import xgrammar  # noqa: F401
        except ImportError as exc:
            return f"cannot import xgrammar ({exc}); pip install xgrammar"
        return None

    def version(self) -> str:
        import importlib.metadata

        return importlib.metadata.version("xgrammar")

    def tokenizer_info(self, vocab: Vocab):
        """xgrammar's view of `vocab`: raw bytes; non-stop specials as empty (xgrammar's 'special')."""
        import xgrammar as xgr

        stops = set(vocab.stop_ids)
        encoded = [b"" if (i in vocab.special_ids and i not in stops) else t for i, t in enumerate(vocab.tokens)]
        return xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=len(vocab),
                                 stop_token_ids=list(vocab.stop_ids), add_prefix_space=False)

    def _compiler(self, vocab: Vocab):
        import xgrammar as xgr

        entry = self._compilers.get(id(vocab))
        if entry is None or entry[0] is not vocab:
            entry = (vocab, xgr.GrammarCompiler(self.tokenizer_info(vocab), max_threads=2))
            self._compilers[id(vocab)] = entry
        return entry[1]

    def compile(self, spec: ConstraintSpec, vocab: Vocab) -> Compiled:
        compiler = self._compiler(vocab)
        t = time.perf_counter()
        with capture_fd2() as native_log:
            try:
                handle = self._compile(compiler, spec)
            except RuntimeError as exc:
                raise grammar_error(self.name, spec, str(exc)) from None
        elapsed = time.perf_counter() - t
        warnings = [CompileWarning(strip_log_prefix(line).removeprefix("Warning: ")) for line in native_log]
        return Compiled(self.name, spec, vocab, handle, elapsed, warnings, normalized=str(handle.grammar))

    def _compile(self, compiler, spec: ConstraintSpec):
        kind = spec.kind
        if kind is Kind.JSON_SCHEMA:
            spec.schema()  # positioned error for malformed JSON before xgrammar sees it
            o = spec.json_options
            separators = (",", ":") if o.whitespace == "compact" and o.indent is None else None
            return compiler.compile_json_schema(
                spec.text,
                any_whitespace=o.whitespace == "flexible" and o.indent is None,
                indent=o.indent,
                separators=separators,
                strict_mode=o.strict_properties,
                max_whitespace_cnt=o.max_whitespace,
            )
        if kind in (Kind.REGEX, Kind.CHOICE):
            return compiler.compile_regex(spec.as_regex())
        if kind is Kind.EBNF:
            return compiler.compile_grammar(spec.text, root_rule_name="root")
        if kind is Kind.LARK:
            return compiler.compile_lark(spec.text)
        if kind is Kind.STRUCTURAL_TAG:
            return compiler.compile_structural_tag(json.loads(spec.text))
        raise AssertionError(f"xgrammar asked to compile {kind}")

    def matcher(self, compiled: Compiled) -> XGrammarMatcher:
        return XGrammarMatcher(compiled.handle, len(compiled.vocab))
