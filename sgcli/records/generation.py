"""`sgcli generate`'s record: one per prompt or batch line (error records have the same keys)."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import Field

from sgcli.records.base import SCHEMA_VERSION, _Strict


class Usage(_Strict):
    prompt_tokens: Optional[int] = Field(None, description="tokens in the rendered prompt")
    completion_tokens: Optional[int] = Field(None, description="tokens generated")
    forced_tokens: Optional[int] = Field(
        None, description="generated tokens jump-forward appended without a forward pass of their own"
    )
    forward_passes: Optional[int] = Field(None, description="model forward passes, the prefill included")
    backtracks: Optional[int] = Field(
        None,
        description="tokens undone at dead ends, where sgcli's schema checker left no token allowed "
        "(each undone token costs a forward pass; docs/guarantee.md, Backtracking)",
    )


class Timings(_Strict):
    load_ms: Optional[float] = Field(None, description="model load time, milliseconds")
    threads: Optional[int] = Field(None, description="torch CPU threads the model ran with")
    compile_ms: Optional[float] = Field(None, description="grammar compile (or cache load) time, milliseconds")
    first_token_ms: Optional[float] = Field(None, description="milliseconds from decode start to the first token")
    start_to_first_token_ms: Optional[float] = Field(
        None, description="milliseconds from process start (interpreter, imports, model load) to the first token"
    )
    tokens_per_s: Optional[float] = Field(None, description="decode speed after the first token")
    mask_ms_p50: Optional[float] = Field(None, description="median time to compute one token mask, ms")
    mask_ms_p99: Optional[float] = Field(None, description="99th percentile of the mask time, ms")
    request_ms: Optional[float] = Field(
        None, description="--engine: wall time of the HTTP request, client-side, milliseconds"
    )
    server_ms: Optional[float] = Field(None, description="--engine: the server's own time, where it reports one, ms")


class ThinkBudget(_Strict):
    tokens: Optional[int] = Field(None, description="--think-budget, or null for none")
    forced_end: bool = Field(False, description="the budget ran out and the end-of-thinking marker was forced")


class Sampling(_Strict):
    """How the output was sampled, as given: with the prompt, enough to ask for the same output again."""

    temperature: float = Field(0.0, description="0: greedy")
    top_p: float = 1.0
    top_k: int = Field(0, description="0: off")
    seed: Optional[int] = Field(
        None, description="the sampler's seed (every request of a batch starts from it); null: none sent"
    )
    max_tokens: Optional[int] = Field(None, description="--max-tokens as given (a prompt near the context gets less)")
    stop: list[str] = Field(default_factory=list, description="--stop strings")
    system: Optional[str] = Field(None, description="the system prompt (-s) the prompt went with")


class Fallback(_Strict):
    backend: str
    reason: str


class Weakened(_Strict):
    pointer: str = Field(..., description="JSON pointer of the keyword in the schema")
    keyword: str
    backend: str
    within: Optional[str] = Field(
        None,
        description="for a schema inside a grammar: which one (`@name`, `%json #N`, a structural tag's content "
        "pointer); absent for --schema",
    )


class GenerationRecord(_Strict):
    """One generation (or one batch line that could not run: same keys, nulls where nothing ran)."""

    schema_version: str = Field(SCHEMA_VERSION, description="version of this record format")
    id: Any = Field(None, description="the request id (batch input), or null for a single prompt")
    prompt: Union[str, list[dict], None] = Field(None, description="the prompt, or the chat messages")
    output: Optional[str] = Field(None, description="the generated text (after the reasoning, if any)")
    parsed: Any = Field(None, description="the output parsed as JSON, where the constraint is JSON")
    valid: Optional[bool] = Field(
        None, description="an independent check passed (true), failed (false), or could not run (null)"
    )
    validated_by: Optional[str] = Field(
        None,
        description="what checked it: jsonschema, lark, lark+jsonschema (a grammar and its JSON sub-grammars), "
        "regex, choices, structural_tags, unconstrained",
    )
    unchecked: Optional[str] = Field(None, description="why nothing independent could check it (valid is null)")
    errors: list[str] = Field(default_factory=list, description="why the output is not valid, or why nothing ran")
    finish_reason: Literal["stop", "length", "repetition", "error"] = Field(
        ...,
        description="stop: the grammar or the model ended (also where the last token --max-tokens allows completed "
        "the grammar and only a stop token could follow, on every backend); length: --max-tokens; repetition: the "
        "repetition guard ended an output stuck repeating one span (errors say which, and from which character); "
        "error: see errors",
    )
    backend: Optional[str] = Field(None, description="the grammar backend that constrained the output")
    fallbacks: list[Fallback] = Field(default_factory=list, description="backends `auto` tried first, and why not")
    weakened: list[Weakened] = Field(
        default_factory=list,
        description="schema keywords the backend's grammar does not enforce, at their pointers; sgcli's schema "
        "checker enforces them while decoding, except those in `unenforced`",
    )
    unenforced: list[Weakened] = Field(
        default_factory=list,
        description="schema keywords nothing enforces (neither the grammar nor the checker; on a server, those "
        "sgcli's checker cannot judge in its answer): only with --allow-unenforced, which generation otherwise refuses",
    )
    warnings: list[str] = Field(default_factory=list, description="what the backend weakened or ignored")
    model: Optional[str] = Field(None, description="the model that generated, as the user named it")
    engine: Optional[str] = Field(None, description="the serving engine (--engine) that generated; absent: in-process")
    device: Optional[str] = Field(
        None, description="where the in-process model ran: cpu, cuda:0, mps (absent with --engine, like the next five)"
    )
    dtype: Optional[str] = Field(None, description="the model's weights dtype: float32, bfloat16, float16")
    model_impl: Optional[str] = Field(
        None, description="whose forward pass ran the in-process model: native (sgcli's) or transformers"
    )
    model_impl_reason: Optional[str] = Field(
        None,
        description="why --model-impl auto ran transformers: what the native forward does not implement for "
        "this model, or an accelerator benchmarks/gpu_check.sh has not checked it on; else null",
    )
    kernel: Optional[str] = Field(
        None,
        description="the matrix-product kernel the native forward packed its weights for: onednn-bf16 "
        "(bfloat16 on a CPU with bf16 dot-product units, prefills widened to float32), onednn-bf16-prefill "
        "(the same, prefills in torch's bfloat16 where it measured faster), onednn-bf16-amx (prefills on AMX "
        "tiles), onednn-f32 (float32, packed for the pass widths where oneDNN measured faster: one row, "
        "2-32 rows, wider), or null (torch's own)",
    )
    chat_template: Optional[str] = Field(
        None,
        description="the chat template the prompt went through: its name (default, or the --template-name), "
        "mistral-common, none (--raw, or a tokenizer without one), or null (a batch line that was no request)",
    )
    sampling: Optional[Sampling] = Field(
        None,
        description="how the run was asked to sample (its error records say it too): with the prompt, how to ask again",
    )
    usage: Usage = Field(default_factory=Usage, description="token counts")
    timings: Timings = Field(default_factory=Timings, description="where the time went")
    reasoning: Optional[str] = Field(None, description="free text before the end-of-thinking marker (--reasoning)")
    think_budget: Optional[ThinkBudget] = Field(
        None, description="the thinking budget and whether it ran out (--reasoning)"
    )
