"""Which checkpoints sgcli's own forward computes, each read into one description (`Arch`).

Why apart from the model (`sgcli.engine.llama`): Llama, Mistral (Ministral), Qwen2, Qwen3, Gemma 2 and Gemma 3
are one decoder with a few switches (biases, query/key norms, sliding-window layers, Gemma's norms,
scaled embeddings and soft-capping, rotary scalings). Reading a config.json into those switches is
where the families differ: a key may be missing where it equals its class's default, or written in
an older format (`rope_scaling`, `rope_local_base_freq`, `sliding_window_pattern`), so the
defaults and conversions here are transformers' own config classes' (5.24). Whatever this
forward does not implement is a `Misfit`, named; the loader then runs transformers.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgcli.engine.rope import KINDS, Rope


class Misfit(ValueError):
    """What the native forward does not implement for a config."""


class Unrunnable(Misfit):
    """What neither forward runs: transformers fails deep inside its forward on it (a tensor size
    mismatch, a ValueError from its masks), which would read as a bug in sgcli, so the loader refuses
    it up front under every --model-impl (`unrunnable`)."""


@dataclass(frozen=True)
class Family:
    architecture: str  # the transformers class of its causal LM
    defaults: dict  # its config class's defaults, for keys a config.json may omit
    gemma: bool = False  # Gemma's norms (1 + weight, four a layer), scaled embeddings, GELU
    qk_norm: bool = False  # query and key heads RMS-normalised before the rotation (Qwen3, Gemma 3)
    qkv_bias: bool = False  # query, key and value projections always biased (Qwen2)
    attention_bias: bool = False  # reads `attention_bias`: every attention projection biased
    mlp_bias: bool = False  # reads `mlp_bias`: every MLP projection biased
    windows: str = "none"  # which layers slide, by default: none, all (Mistral), qwen (from max_window_layers), types


_COMMON = {"num_key_value_heads": None, "head_dim": None, "hidden_act": "silu", "rms_norm_eps": 1e-6}
_COMMON |= {"tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False}
_QWEN = _COMMON | {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32}
_QWEN |= {"num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768}
_QWEN |= {"sliding_window": 4096, "use_sliding_window": False, "max_window_layers": 28, "layer_types": None}
_GEMMA = _COMMON | {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26}
_GEMMA |= {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "tie_word_embeddings": True}
_GEMMA |= {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "sliding_window": 4096}
_GEMMA |= {"layer_types": None, "use_bidirectional_attention": None}
_MISTRAL = _COMMON | {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32}
_MISTRAL |= {"num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072}
_MISTRAL |= {"sliding_window": 4096, "layer_types": None}

FAMILIES = {
    "llama": Family(
        "LlamaForCausalLM",
        _COMMON
        | {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32}
        | {"num_attention_heads": 32, "max_position_embeddings": 2048},
        attention_bias=True,
        mlp_bias=True,
    ),
    "mistral": Family("MistralForCausalLM", _MISTRAL, windows="all"),
    # Mistral with `layer_types` (Ministral 8B: full and sliding layers interleaved); transformers reads a
    # mistral config.json that lists them as this (AutoConfig), so `read` does too
    "ministral": Family("MinistralForCausalLM", _MISTRAL, windows="all"),
    "qwen2": Family("Qwen2ForCausalLM", _QWEN, qkv_bias=True, windows="qwen"),
    "qwen3": Family("Qwen3ForCausalLM", _QWEN | {"head_dim": 128}, qk_norm=True, attention_bias=True, windows="qwen"),
    "gemma2": Family(
        "Gemma2ForCausalLM",
        _GEMMA | {"max_position_embeddings": 8192, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
        gemma=True,
        attention_bias=True,
        windows="types",
    ),
    "gemma3_text": Family(
        "Gemma3ForCausalLM",
        _GEMMA
        | {"vocab_size": 262208, "max_position_embeddings": 131072, "use_bidirectional_attention": False}
        | {"final_logit_softcapping": None, "attn_logit_softcapping": None, "sliding_window_pattern": 6},
        gemma=True,
        qk_norm=True,
        attention_bias=True,
        windows="types",
    ),
}
_THETA = {"gemma3_text": {"full_attention": 1_000_000.0, "sliding_attention": 10_000.0}}


@dataclass(frozen=True)
class Arch:
    """A checkpoint as the native forward computes it, every default filled in."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    activation: str  # silu or gelu_pytorch_tanh
    tied: bool
    max_positions: int
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    gemma: bool
    attn_scale: float | None  # None: 1 / sqrt(head_dim)
    attn_softcap: float | None
    final_softcap: float | None
    windows: tuple[int | None, ...]  # per layer: its sliding window (None: global attention)
    ropes: tuple[Rope, ...]  # the distinct rotary embeddings
    layer_rope: tuple[int, ...]  # per layer: which of `ropes`


def read(config: dict) -> Arch:
    """`config` (a config.json) as an `Arch`; raises `Misfit` naming what is not implemented."""
    model_type = config.get("model_type")
    read_as = model_type
    if model_type == "mistral" and "layer_types" in config:
        read_as = "ministral"  # transformers' AutoConfig reads it so, whatever `architectures` says
    family = FAMILIES.get(read_as)
    architectures = config.get("architectures") or [family.architecture if family else None]
    if family is None or architectures not in ([family.architecture], [FAMILIES[model_type].architecture]):
        names = ", ".join(map(str, architectures))
        raise Misfit(f"its architecture is {model_type} ({names}), which the native forward does not implement")

    def get(name: str):
        return config.get(name, family.defaults.get(name))

    heads = get("num_attention_heads")
    head_dim = get("head_dim") or get("hidden_size") // heads
    activation = get("hidden_activation") if family.gemma else get("hidden_act")
    layers = get("num_hidden_layers")
    problems: list[str] = []
    broken = [why] if (why := _heads_problem(heads, get("num_key_value_heads"))) else []
    if activation != ("gelu_pytorch_tanh" if family.gemma else "silu"):
        problems.append(f"the activation {activation}")
    if config.get("quantization_config"):
        problems.append("a quantization config")
    if family.gemma and get("use_bidirectional_attention"):
        problems.append("bidirectional attention")
    types = _layer_types(family, get, layers, problems)
    windows = _windows(family, get, config.get("layer_types") is not None, types, broken)
    ropes, layer_rope = _ropes(read_as, config, get, head_dim, types, problems)
    _partial_rope(read_as, ropes, problems, broken)
    if broken:
        raise Unrunnable("; ".join(broken))
    if problems:
        raise Misfit(f"it uses {' and '.join(problems)}")
    biased = family.attention_bias and bool(get("attention_bias"))
    scalar = get("query_pre_attn_scalar") if family.gemma else None
    return Arch(
        model_type=read_as,
        vocab_size=get("vocab_size"),
        hidden_size=get("hidden_size"),
        intermediate_size=get("intermediate_size"),
        layers=layers,
        heads=heads,
        kv_heads=get("num_key_value_heads") or heads,
        head_dim=head_dim,
        eps=get("rms_norm_eps"),
        activation=activation,
        tied=bool(get("tie_word_embeddings")),
        max_positions=get("max_position_embeddings"),
        qkv_bias=family.qkv_bias or biased,
        o_bias=biased,
        mlp_bias=family.mlp_bias and bool(get("mlp_bias")),
        qk_norm=family.qk_norm,
        gemma=family.gemma,
        attn_scale=None if scalar is None else scalar**-0.5,
        attn_softcap=get("attn_logit_softcapping") if model_type == "gemma2" else None,  # Gemma 3 ignores it
        final_softcap=get("final_logit_softcapping") if family.gemma else None,
        windows=windows,
        ropes=ropes,
        layer_rope=layer_rope,
    )


def misfit(config: dict) -> str | None:
    """Why the native forward does not compute `config`'s model exactly (None when it does)."""
    try:
        read(config)
    except Misfit as exc:
        return str(exc)
    return None


def unrunnable(config: dict) -> str | None:
    """Why neither forward can run `config`'s model, naming its keys (None where one can): key and
    value heads that do not divide the query heads (any model type: transformers' attention repeats
    each key head over a whole group), and, in `FAMILIES`, what `read` finds transformers cannot run."""
    why = _heads_problem(config.get("num_attention_heads"), config.get("num_key_value_heads"))
    if why is not None or config.get("model_type") not in FAMILIES:
        return why
    try:
        read(config)
    except Unrunnable as exc:
        return str(exc)
    except Misfit:
        return None
    return None


def _heads_problem(heads, kv_heads) -> str | None:
    if isinstance(heads, int) and isinstance(kv_heads, int) and kv_heads > 0 and heads % kv_heads:
        return f"num_key_value_heads ({kv_heads}) does not divide num_attention_heads ({heads})"
    return None


def _layer_types(family: Family, get, layers: int, problems: list[str]) -> list[str]:
    """Each layer's attention type: `layer_types` as given (transformers' older name "attention" read
    as "full_attention"), else as the config class fills it in. A type this forward does not compute,
    or a list of another length than the layers, is a problem (transformers refuses both too)."""
    given = get("layer_types")
    if family.windows == "none":
        return ["full_attention"] * layers  # transformers' Llama reads no layer types
    if given is not None:
        if not isinstance(given, list) or len(given) != layers:
            problems.append(f"layer_types that are not a list of its {layers} layers")
            return ["full_attention"] * layers
        types = ["full_attention" if t == "attention" else t for t in given]
        problems += [f"{t!r} layers" for t in dict.fromkeys(map(str, types)) if t not in _ATTENTION]
        return types
    window = get("sliding_window")
    if family.windows == "all":  # Mistral (and Ministral's default): every layer slides, if a window is set
        return ["sliding_attention" if window is not None else "full_attention"] * layers
    if family.windows == "qwen":
        window = window if get("use_sliding_window") else None
        first = get("max_window_layers")
        return ["sliding_attention" if window is not None and i >= first else "full_attention" for i in range(layers)]
    pattern = get("sliding_window_pattern") if family.architecture == "Gemma3ForCausalLM" else 2  # Gemma 2 alternates
    return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]


_ATTENTION = ("full_attention", "sliding_attention")


def _windows(family: Family, get, listed: bool, types: list[str], broken: list[str]) -> tuple[int | None, ...]:
    """Each layer's sliding window (None: it attends to every earlier position). Sliding layers
    without a window are `broken`: transformers' sliding mask raises on them (Qwen2, Qwen3, Gemma)."""
    if family.windows == "none":
        return (None,) * len(types)  # transformers' Llama ignores any sliding_window
    window = get("sliding_window")
    off = family.windows == "qwen" and not get("use_sliding_window")
    if off:
        window = None
    if window is None and "sliding_attention" in types:
        whence = "layer_types lists them" if listed else "its family's default layer pattern"
        broken.append(f"sliding layers without a sliding_window ({whence}{'; use_sliding_window is false' * off})")
    return tuple(window if t == "sliding_attention" else None for t in types)


def _ropes(model_type: str, config: dict, get, head_dim: int, types: list[str], problems: list[str]):
    """(the distinct rotary embeddings, which one each layer uses), from `rope_parameters` (5.x) or
    `rope_theta` and `rope_scaling` (older files), as transformers standardises them."""
    layers = len(types)
    if model_type not in _THETA:
        theta = config.get("rope_theta", 10000.0)
        rope = _rope(config.get("rope_scaling") or config.get("rope_parameters") or {}, theta, head_dim, get, problems)
        return (rope,), (0,) * layers
    # Gemma 3: one rotary embedding for the sliding layers, one for the global ones
    nested = config.get("rope_parameters") or {"full_attention": None, "sliding_attention": None}
    if not isinstance(nested, dict) or not set(nested) <= {"full_attention", "sliding_attention"}:
        problems.append("rope parameters it cannot read")
        nested = {}
    full = dict(nested.get("full_attention") or {"rope_type": "default"})
    sliding = dict(nested.get("sliding_attention") or {"rope_type": "default"})
    full.update(config.get("rope_scaling") or {})  # an older file's scaling is the global layers' own
    full.setdefault("rope_theta", config.get("rope_theta", _THETA[model_type]["full_attention"]))
    sliding.setdefault("rope_theta", config.get("rope_local_base_freq", _THETA[model_type]["sliding_attention"]))
    ropes = (_rope(full, None, head_dim, get, problems), _rope(sliding, None, head_dim, get, problems))
    return ropes, tuple(1 if t == "sliding_attention" else 0 for t in types)


def _rope(params, theta, head_dim: int, get, problems: list[str]) -> Rope:
    if not isinstance(params, dict):
        problems.append("rope parameters it cannot read")
        return Rope("default", 10000.0, head_dim, 1)
    params = dict(params)
    kind = params.pop("rope_type", params.pop("type", "default"))
    theta = params.pop("rope_theta", theta if theta is not None else 10000.0)
    if kind not in KINDS:
        problems.append(f"{kind} rope scaling")
    partial = params.pop("partial_rotary_factor", get("partial_rotary_factor"))
    if partial not in (None, 1, 1.0):
        params["partial_rotary_factor"] = partial  # read by `_partial_rope`; the frequencies ignore it
    if kind in ("llama3", "yarn", "longrope"):
        params.setdefault("original_max_position_embeddings", get("max_position_embeddings"))
    if get("original_max_position_embeddings") is not None and kind in ("llama3", "yarn", "longrope"):
        params["original_max_position_embeddings"] = get("original_max_position_embeddings")  # Phi-3's spelling wins
    return Rope(kind, float(theta), head_dim, get("max_position_embeddings"), params)


def _partial_rope(model_type: str, ropes: tuple[Rope, ...], problems: list[str], broken: list[str]) -> None:
    """A `partial_rotary_factor` below 1: the default rotary embedding of these families ignores it
    (their `compute_default_rope_parameters` rotates the whole head; transformers' logits with and
    without it are equal), so the native forward does too. With a scaling, transformers computes
    frequencies for part of the head and then rotates all of it: a size mismatch in each family of
    `_PARTIAL_FAILS` and every scaling of `KINDS` (transformers 5.25); Gemma 3 runs it, and the
    native forward leaves it, as the others' untried cases, to transformers."""
    for rope in ropes:
        partial = rope.get("partial_rotary_factor")
        if partial is None or rope.kind == "default":
            continue
        if model_type in _PARTIAL_FAILS and rope.kind in KINDS:
            broken.append(f"partial_rotary_factor {partial} with {rope.kind} rope scaling")
        else:
            problems.append("a partial rotary embedding")
        return


_PARTIAL_FAILS = ("llama", "mistral", "qwen2", "qwen3", "gemma2")
