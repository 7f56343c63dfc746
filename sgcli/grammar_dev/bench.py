"""`sgcli bench`: a MaskBench-style report on the user's own schemas and grammars.

Per backend: how many items compiled and why the others failed, compile time cold and
through the on-disk cache, and the time of each mask along the tokens of each item's
valid instances. Instances come alongside the grammar (JSONL input, or a sibling
NAME.test.yaml's accepted cases) or, for a JSON Schema, from the project's instance
builder (`bench_items.py` reads them). Compiles go through `compile_for`/`compile_cached`, so the same limits apply as
in `generate`; masks are walked with the one `walk_masks` shared with compare-backends.
No terminal code here: the command in sgcli/cli/bench_cmd.py prints what this returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sgcli.backends import check_something_runs, compile_for, get_backend, unsupported_reason
from sgcli.backends.compile_cache import HIT, cache_enabled, compile_cached
from sgcli.backends.matching import walk_masks
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError
from sgcli.extras import MissingExtra
from sgcli.grammar_dev.bench_items import Item, load_items
from sgcli.timing import percentile

__all__ = ["BackendResult", "Item", "check_something_to_measure", "generate", "load_items", "plot", "run", "summary"]


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


def check_something_to_measure(items: list[Item], names: list[str]) -> None:
    """Exit 2 before anything loads where no chosen backend can run any item (all unsupported or not
    installed): a report of skips measured nothing. Items that could not be read are reported on their own."""
    check_something_runs([(n, item.spec) for n in names for item in items if item.error is None], "measure")


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
    impl.forget_compiles()  # cold: not a hit in the library's own memory for a schema seen before
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
    walked = _walk_all(result, compiled, item, walk_masks)
    error = walked.pop("matcher_error", None)
    record |= walked
    if error is not None:  # its masks mean nothing: neither timed nor used for --generate
        return _failed(result, record, "matcher error", error)
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
        if walk["error"] is not None:
            at = walk["steps"] - 1
            return {"matcher_error": f"the {compiled.backend} matcher failed at token {at}: {walk['error']}"}
        mask_ms += walk["mask_ms"]
        if text is not None:
            result.instances_walked += 1
            if not walk["accepted"]:
                result.instances_rejected += 1
                at = walk["rejected_at_token"]
                rejected.append({"instance": index, "where": item.place(index), "rejected_at_token": at})
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
    engine_jumps = has_jump_forward()
    by_name = {item.name: item for item in items}
    warm = next(((r, n) for r in results for n in r.compiled_items), None)
    if warm is not None:  # the first forward passes are slow (allocations, kernels): not charged to a backend
        _generate_one(warm[0].compiled_items[warm[1]], by_name[warm[1]], lm, tokenizer, 2, None)
    for result in results:
        jump, note = _jump_forward_measured(result.backend, engine_jumps)
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
        } | ({} if note is None else {"note": note})


def _jump_forward_measured(backend: str, engine_jumps: bool) -> tuple[bool, str | None]:
    """Whether jump-forward can be timed for `backend`, and why not: a backend whose matcher reports no
    forced text runs the plain loop with the switch on, so a second figure would be the first measured again."""
    if not engine_jumps:
        return False, JUMP_FORWARD_MISSING
    if not get_backend(backend).capabilities.jump_forward:
        return False, f"{backend} reports no forced text, so there is no jump-forward: only plain tokens/s was measured"
    return True, None


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
