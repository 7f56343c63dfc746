"""`sgcli bench`: a MaskBench-style report on the user's own schemas and grammars.

Per backend: how many items compiled and why the others failed, compile time cold and
through the on-disk cache, and the time of each mask along the tokens of each item's
valid instances. Instances come alongside the grammar (JSONL input, or a sibling
NAME.test.yaml's accepted cases) or, for a JSON Schema, from the project's instance
builder. Compiles go through `compile_for`/`compile_cached`, so the same limits apply as
in `generate`; masks are walked with the one `walk_masks` shared with compare-backends.
No terminal code here: the command in sgcli/cli/bench_cmd.py prints what this returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sgcli.backends import compile_for, get_backend, unsupported_reason
from sgcli.backends.compile_cache import HIT, cache_enabled, compile_cached
from sgcli.backends.matching import walk_masks
from sgcli.constraints.sources import check_schema, from_file, kind_from_extension, read_text
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import Location, UserError
from sgcli.extras import MissingExtra
from sgcli.grammar_dev.grammar_tests import load_suite, parse_kind
from sgcli.lint.schema_instances import Impossible, InstanceBuilder
from sgcli.timing import percentile


@dataclass
class Item:
    """One grammar to measure, with the texts it must accept."""

    name: str
    spec: ConstraintSpec | None
    instances: list[str]
    source: str  # "given", "test file", "generated" or "none"
    where: str | None = None  # "file:line" of a JSONL item: error positions inside its re-serialized text mean nothing
    # why the file or line could not be read (spec is None then): reported per backend as an "input error",
    # and the other items are still measured
    error: UserError | None = None


@dataclass
class BackendResult:
    """One backend's measurements over every item."""

    backend: str
    compiled: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # reason -> count
    compile_cold_ms: list[float] = field(default_factory=list)
    compile_cached_ms: list[float] = field(default_factory=list)
    mask_ms: list[float] = field(default_factory=list)
    instances_walked: int = 0
    instances_rejected: int = 0
    items: list[dict] = field(default_factory=list)  # one record per item
    compiled_items: dict[str, object] = field(default_factory=dict, repr=False)  # item name -> Compiled, for --generate
    generation: dict | None = None  # tokens/s with and without jump-forward (--generate)


def load_items(path: str) -> list[Item]:
    """A folder of grammar files (kind from extension), one such file, or a JSONL file of items."""
    p = Path(path)
    if p.is_dir():
        return _folder_items(p)
    if not p.exists():
        raise UserError(
            f"bench input not found: {path}", hint="give a schema or grammar file, a folder of them, or a .jsonl file"
        )
    if p.suffix.lower() == ".jsonl":
        return _jsonl_items(p)
    try:
        kind_from_extension(path)
    except UserError as exc:
        raise UserError(
            f"bench input {path} is neither a schema or grammar file, a folder, nor a .jsonl file",
            hint=exc.hint.split(", or the explicit flag")[0] + ", a folder of such files, or a .jsonl file",
        ) from None
    return [_file_item(p)]


def _folder_items(folder: Path) -> list[Item]:
    items = []
    for f in sorted(x for x in folder.iterdir() if x.is_file() and not x.name.endswith((".test.yaml", ".test.yml"))):
        try:
            kind_from_extension(str(f))
        except UserError:
            continue  # READMEs, notes: not grammars
        try:
            items.append(_file_item(f))
        except UserError as exc:
            items.append(_unreadable(f.name, exc))
    if not items:
        raise UserError(f"no schema or grammar files in {folder}", hint="files are picked by extension, as in compile")
    return items


def _unreadable(name: str, exc: UserError) -> Item:
    return Item(name, None, [], "none", error=exc)


def _file_item(f: Path) -> Item:
    """One grammar file, with the accepted cases of its NAME.test.yaml or, for a schema, built instances."""
    spec = from_file(str(f))
    given = _test_file_instances(f)
    if given:
        return Item(f.name, spec, given, "test file")
    return _with_generated(Item(f.name, spec, [], "none"))


def _test_file_instances(grammar: Path) -> list[str]:
    """The accepted cases of a sibling NAME.test.yaml (as in sgcli/grammars/), if there is one."""
    stem = grammar.name.split(".")[0]
    test = grammar.with_name(f"{stem}.test.yaml")
    if not test.is_file():
        return []
    return [c.input for c in load_suite(str(test)).cases if c.accept]


def _with_generated(item: Item) -> Item:
    """For a JSON Schema without instances: the minimal and the full instance the builder proposes."""
    if item.spec.kind is not Kind.JSON_SCHEMA or item.instances:
        return item

    schema = json.loads(item.spec.text)
    texts = []
    for full in (False, True):
        try:
            text = json.dumps(InstanceBuilder(schema, full=full).build(), ensure_ascii=False)
        except (Impossible, RecursionError):
            continue
        if text not in texts:
            texts.append(text)
    return Item(item.name, item.spec, texts, "generated" if texts else "none", item.where)


def _jsonl_items(path: Path) -> list[Item]:
    text, origin = read_text(str(path), what="bench file")
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(_jsonl_item(path, line, Location(origin, n, 1)))
        except UserError as exc:  # this line is reported as an input error; the others are measured
            items.append(_unreadable(f"{path.name}:{n}", exc))
    if not items:
        raise UserError(f"{origin} has no items", hint='one JSON object a line: {"schema": {...}, "instances": [...]}')
    return items


def _jsonl_item(path: Path, line: str, at: Location) -> Item:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"malformed JSON: {exc.msg}", location=Location(at.path, at.line, exc.colno)) from None
    spec = _jsonl_spec(obj, at)
    if spec.kind is Kind.JSON_SCHEMA:
        check_schema(spec)
    instances = _jsonl_instances(obj, at)
    name = str(obj.get("name") or f"{path.name}:{at.line}")
    return _with_generated(Item(name, spec, instances, "given" if instances else "none", where=spec.origin))


def _jsonl_spec(obj, at: Location) -> ConstraintSpec:
    if not isinstance(obj, dict) or ("schema" in obj) == ("grammar" in obj):
        raise UserError(
            "each line needs exactly one of 'schema' or 'grammar'",
            location=at,
            hint='{"schema": {...}, "instances": [...]} or {"grammar": "...", "kind": "lark", "instances": [...]}',
        )
    origin = f"{at.path}:{at.line}"
    if "schema" in obj:
        if not isinstance(obj["schema"], (dict, bool)):
            raise UserError("'schema' must be a JSON object", location=at)
        return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(obj["schema"]), origin)
    if not isinstance(obj["grammar"], str) or not isinstance(obj.get("kind"), str):
        raise UserError(
            "'grammar' must be a string and 'kind' must name its kind", location=at, hint="kind: ebnf, lark, regex, ..."
        )
    kind = parse_kind(obj["kind"], at)
    if kind is Kind.JSON_SCHEMA:
        raise UserError("give a JSON Schema as 'schema' (an object), not as 'grammar'", location=at)
    return ConstraintSpec(kind, obj["grammar"], origin)


def _jsonl_instances(obj: dict, at: Location) -> list[str]:
    """Instances as texts: strings as they are for grammars; JSON values serialized for schemas."""
    given = obj.get("instances", [])
    if not isinstance(given, list):
        raise UserError("'instances' must be a list", location=at)
    if "schema" in obj:
        return [json.dumps(v, ensure_ascii=False) for v in given]
    if not all(isinstance(v, str) for v in given):
        raise UserError("a grammar's 'instances' must be strings (the texts it accepts)", location=at)
    return list(given)


def run(
    items: list[Item], names: list[str], vocab, on_item: Callable[[str, str, dict | None], None] | None = None
) -> list[BackendResult]:
    """Compile every item with every backend and walk its instances; one result per backend.
    The cached column follows the process's cache switch (`--no-cache` turns it off).
    `on_item(backend, item name, record)` is called as each item starts (record None) and once it is
    measured (its record): progress on a long run, records streamed as they come."""
    results = []
    for name in names:
        _warm_up(name, vocab)
        result = BackendResult(name)
        for item in items:
            if on_item is not None:
                on_item(name, item.name, None)
            result.items.append(_bench_item(result, item, vocab))
            if on_item is not None:
                on_item(name, item.name, result.items[-1])
        results.append(result)
    return results


def _bench_item(result: BackendResult, item: Item, vocab) -> dict:
    """Compile cold (bounded, cache off) and, where cacheable, load from the cache; then walk.
    Times are the library's own (`Compiled.compile_s`: the compile, or the load on a hit), not
    the bounded-compile child that runs first (see sgcli/backends/bounded.py)."""

    if item.error is not None:
        where = f"{item.error.location}: " if item.error.location else ""
        record = {"item": item.name, "kind": "unknown", "backend": result.backend}
        return _failed(result, record, "input error", where + item.error.message)
    record: dict = {"item": item.name, "kind": item.spec.kind.value, "backend": result.backend}
    impl = get_backend(result.backend)
    unsupported, missing = unsupported_reason(impl, item.spec), impl.unavailable_reason()
    if unsupported:
        return _failed(result, record, "unsupported", f"{result.backend} does not support {unsupported}")
    if missing:
        return _failed(result, record, "unavailable", missing)
    spec = item.spec
    try:
        compiled, _ = compile_for(
            result.backend, spec, vocab, compile_one=lambda b: compile_cached(b, spec, vocab, use_cache=False).compiled
        )
    except UserError as exc:
        where = f"{item.where or exc.location}: " if item.where or exc.location else ""
        return _failed(result, record, _reason_of(exc), where + exc.message) | {"limit": getattr(exc, "flag", None)}
    result.compiled += 1
    cold_ms = compiled.compile_s * 1000
    result.compile_cold_ms.append(cold_ms)
    record |= {"status": "compiled", "compile_cold_ms": round(cold_ms, 3)}
    if cache_enabled():
        try:
            compile_cached(impl, spec, vocab).settled()  # make sure an entry exists, then time a load of it
            outcome = compile_cached(impl, spec, vocab)
        except UserError as exc:  # the entry's own compile ran into a limit: this item's cache is not measured
            record["cache"] = f"not measured: {_reason_of(exc)}"
        else:
            record["cache"] = outcome.status if outcome.reason is None else f"{outcome.status}: {outcome.reason}"
            if outcome.status == HIT:  # not for an entry the cache chose not to keep (a load slower than a compile)
                record["compile_cached_ms"] = round(outcome.compiled.compile_s * 1000, 3)
                result.compile_cached_ms.append(record["compile_cached_ms"])
    record |= _walk_all(result, compiled, item, walk_masks)
    result.compiled_items[item.name] = compiled
    return record


def _warm_up(name: str, vocab) -> None:
    """One throwaway compile first, so one-time set-up (a backend's tokenizer tables for this
    vocabulary, lazy imports) is not charged to whichever item happens to come first."""
    impl = get_backend(name)
    spec = ConstraintSpec(Kind.REGEX, "a", "<warm-up>")
    if unsupported_reason(impl, spec) is None and not impl.unavailable_reason():
        try:
            impl.compile(spec, vocab)
        except UserError:
            pass


def _walk_all(result: BackendResult, compiled, item: Item, walk_masks) -> dict:
    texts = item.instances or [None]  # no instance: time the first mask only
    rejected = []
    mask_ms: list[float] = []
    for index, text in enumerate(texts):
        walk = walk_masks(compiled, text)
        mask_ms += walk["mask_ms"]
        if text is not None:
            result.instances_walked += 1
            if not walk["accepted"]:
                result.instances_rejected += 1
                rejected.append({"instance": index, "rejected_at_token": walk["rejected_at_token"]})
    result.mask_ms += mask_ms
    return {
        "instances": len(item.instances),
        "instance_source": item.source,
        "masks": len(mask_ms),
        "mask_ms_p50": _round(percentile(mask_ms, 0.5), 6),
        "mask_ms_max": _round(max(mask_ms), 6),
        "rejected": rejected,
    }


def _reason_of(exc: UserError) -> str:
    """A short failure category for the per-backend tally."""
    if getattr(exc, "flag", None):  # a CompileLimitError: the flag that raises the limit
        return f"compile limit ({exc.flag})"
    return "compile error"


def _failed(result: BackendResult, record: dict, reason: str, message: str) -> dict:
    result.failed[reason] = result.failed.get(reason, 0) + 1
    return record | {"status": "failed", "reason": reason, "message": message}


def summary(result: BackendResult) -> dict:
    """The per-backend row of the report."""

    def stats(values: list[float], *, with_max: bool = False, digits: int = 3) -> dict:
        out = {"p50": _round(percentile(values, 0.5), digits), "p99": _round(percentile(values, 0.99), digits)}
        if with_max:
            out["max"] = _round(max(values) if values else None, digits)
        return out | {"n": len(values)}

    return {
        "backend": result.backend,
        "compiled": result.compiled,
        "failed": sum(result.failed.values()),
        "failed_by_reason": dict(sorted(result.failed.items())),
        "compile_cold_ms": stats(result.compile_cold_ms),
        "compile_cached_ms": stats(result.compile_cached_ms),
        "mask_ms": stats(result.mask_ms, with_max=True, digits=6),  # masks take microseconds: keep the digits
        "instances_walked": result.instances_walked,
        "instances_rejected": result.instances_rejected,
    } | ({"generation": result.generation} if result.generation is not None else {})


def _round(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


PLOT_SUFFIXES = (".png", ".svg")


def check_plot_path(path: str) -> None:
    """Exit-2 checks for --plot, done before any measuring: the suffix, the folder, matplotlib."""
    import importlib.util

    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise UserError(f"--plot {path}: the file must end in .png or .svg, not '{suffix or '(none)'}'")
    if not Path(path).resolve().parent.is_dir():
        raise UserError(f"--plot {path}: the folder {Path(path).parent} does not exist", hint="create it first")
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingExtra("matplotlib", "bench", "--plot")


def plot(results: list[BackendResult], path: str) -> None:
    """Box plots of compile and mask ms per backend, log scale, saved as PNG or SVG."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    from matplotlib import pyplot as plt

    panels = [("compile ms (cold)", "compile_cold_ms"), ("mask ms", "mask_ms")]  # ms, as the table and JSON
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.5), squeeze=False)
    for ax, (title, attr) in zip(axes[0], panels):
        shown = [r for r in results if getattr(r, attr)]
        if shown:
            ax.boxplot([getattr(r, attr) for r in shown], whis=(1, 99), showfliers=True)
            ax.set_xticks(range(1, len(shown) + 1), [r.backend for r in shown])
            ax.set_yscale("log")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("sgcli bench: whiskers at p1/p99")
    fig.tight_layout()
    try:
        fig.savefig(path, format=Path(path).suffix.lower().lstrip("."))
    except OSError as exc:
        raise UserError(f"cannot write --plot {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)


JUMP_FORWARD_MISSING = "decode() has no jump_forward switch yet: only plain tokens/s was measured"


def has_jump_forward() -> bool:
    """Whether the engine's decode loop takes `jump_forward` (the engine-jf work adds it)."""
    import inspect

    from sgcli.engine.decode import decode

    return "jump_forward" in inspect.signature(decode).parameters


def generate(results: list[BackendResult], items: list[Item], lm, tokenizer, *, max_tokens: int, n_items: int):
    """With --generate: greedy generation on the first `n_items` compiled items of each backend,
    tokens/s with jump-forward and without, alternating the two so load drift hits both alike.
    tokens/s = completion tokens / decode seconds (prefill included) summed over the items."""
    jump = has_jump_forward()
    by_name = {item.name: item for item in items}
    warm = next(((r, n) for r in results for n in r.compiled_items), None)
    if warm is not None:  # the first forward passes are slow (allocations, kernels): not charged to a backend
        _generate_one(warm[0].compiled_items[warm[1]], by_name[warm[1]], lm, tokenizer, 2, None)
    for result in results:
        names = list(result.compiled_items)[:n_items]
        totals = {False: [0, 0.0], True: [0, 0.0]}
        completed = 0  # plain runs that ended where the grammar can stop
        for name in names:
            compiled = _as_generate_compiles(result.compiled_items[name])
            for jf in (False, True) if jump else (False,):
                f = _generate_one(compiled, by_name[name], lm, tokenizer, max_tokens, jf if jump else None)
                totals[jf][0] += f.completion_tokens
                totals[jf][1] += f.decode_s
                completed += f.grammar_complete and not jf
        result.generation = {
            "items": len(names),
            "max_tokens": max_tokens,
            "tokens_per_s": _rate(*totals[False]),
            "tokens_per_s_jump_forward": _rate(*totals[True]) if jump else None,
            "completed": completed,
        } | ({} if jump else {"note": JUMP_FORWARD_MISSING})


def _as_generate_compiles(compiled):
    """The grammar `sgcli generate` would compile for this item: a JSON Schema in generate's default
    layout (GENERATE_WHITESPACE), not the flexible one its instances were walked under."""
    import dataclasses

    from sgcli.backends import compile_for
    from sgcli.constraints.spec import GENERATE_WHITESPACE

    spec = compiled.spec
    if spec.kind is not Kind.JSON_SCHEMA or spec.json_options.whitespace == GENERATE_WHITESPACE:
        return compiled
    options = dataclasses.replace(spec.json_options, whitespace=GENERATE_WHITESPACE, for_generation=True)
    return compile_for(compiled.backend, dataclasses.replace(spec, json_options=options), compiled.vocab)[0]


def _rate(tokens: int, seconds: float) -> float | None:
    return round(tokens / seconds, 2) if tokens and seconds > 0 else None


def _generate_one(compiled, item: Item, lm, tokenizer, max_tokens: int, jump_forward: bool | None):
    """One greedy generation; `jump_forward` None where decode() has no such switch."""
    from sgcli.engine.decode import Finished, decode
    from sgcli.engine.sampling import SamplingParams

    what = "JSON matching this schema" if item.spec.kind is Kind.JSON_SCHEMA else f"text in this {item.spec.kind.label}"
    prompt = f"Write {what}:\n{item.spec.text[:2000]}"
    ids = tokenizer.render_prompt([{"role": "user", "content": prompt}]).ids
    extra = {} if jump_forward is None else {"jump_forward": jump_forward}
    events = decode(lm, ids, compiled, params=SamplingParams(0.0), max_tokens=max_tokens, **extra)
    return next(e for e in events if isinstance(e, Finished))
