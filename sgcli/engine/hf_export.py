"""The embedded (or any GGUF) model as one Hugging Face folder a serving engine can load.

sgcli already converts a GGUF file once into a cached model folder (weights + config) and a
cached tokenizer folder; a server such as vLLM wants both in one folder. This links them
side by side under the same cache entry, so nothing is converted or copied twice.

    python -m sgcli.engine.hf_export [MODEL.gguf]   # prints the folder
"""

from __future__ import annotations

import sys
from pathlib import Path

from sgcli.cache.paths import converted_dir
from sgcli.engine.gguf_convert import convert_gguf
from sgcli.errors import UserError
from sgcli.models.refs import resolve_model
from sgcli.tokenizers.gguf import cached_tokenizer_dir


def export_hf_folder(gguf: Path) -> Path:
    """The served folder: the conversion's and the tokenizer's files linked, and the weights the
    recipe makes written out once as float32 safetensors (a server cannot replay a recipe)."""
    model_dir = convert_gguf(gguf)
    tokenizer_dir = cached_tokenizer_dir(gguf)
    out = converted_dir(gguf) / "hf"
    out.mkdir(parents=True, exist_ok=True)
    for source in [*model_dir.iterdir(), *tokenizer_dir.iterdir()]:
        link = out / source.name
        if source.name in _NOT_LINKED or (link.is_symlink() and link.resolve() == source.resolve()):
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(source.resolve())
    _write_config(model_dir / "config.json", out / "config.json")
    _write_weights(gguf, model_dir, out / "model.safetensors")
    _tied_embeddings_shard(out / "model.safetensors", out / "embed_tokens.safetensors")
    return out


_NOT_LINKED = {"config.json", "recipe.json", "model.safetensors"}


def _write_weights(gguf: Path, model_dir: Path, target: Path) -> None:
    """Every weight as float32 safetensors, made from the recipe (once per conversion: rewritten when
    the recipe is newer), saved as the conversion once saved them (one of two tied twins)."""
    if (
        target.is_file()
        and not target.is_symlink()
        and target.stat().st_mtime >= (model_dir / "recipe.json").stat().st_mtime
    ):
        return
    import torch
    from safetensors.torch import save_model

    from sgcli.engine.gguf_recipe import load_state
    from sgcli.engine.loader import load_state_direct

    weights = {k: v.clone() for k, v in load_state(model_dir, gguf).items()}  # own storage each, as saving needs
    model = load_state_direct(model_dir, torch.float32, weights)
    if model is None:
        raise UserError(f"the conversion in {model_dir} cannot be exported: transformers cannot build its model")
    target.unlink(missing_ok=True)
    tmp = target.with_suffix(".partial")
    save_model(model, str(tmp))
    tmp.replace(target)


_EMBED, _HEAD = "model.embed_tokens.weight", "lm_head.weight"


def _tied_embeddings_shard(weights: Path, shard: Path) -> None:
    """The input embeddings as a shard of their own, when the checkpoint holds only `lm_head.weight`.

    Saving tied weights keeps one name (here the head's); transformers re-ties them on load, but a
    server that finds `lm_head.weight` uses it and leaves the embeddings it never saw at zero
    (vLLM 0.32: every hidden state zero, every logit equal). Servers load every *.safetensors file
    in the folder, so a second file with the same tensor under the embeddings' name is enough.
    """
    from safetensors import safe_open

    with safe_open(str(weights), "pt") as f:
        names = set(f.keys())
        if _EMBED in names or _HEAD not in names:
            shard.unlink(missing_ok=True)
            return
        if shard.is_file():
            return
        head = f.get_tensor(_HEAD)
    from safetensors.torch import save_file

    tmp = shard.with_suffix(".partial")
    save_file({_EMBED: head.contiguous()}, str(tmp), metadata={"format": "pt"})
    tmp.replace(shard)


def _write_config(source: Path, target: Path) -> None:
    """The config with `architectures` filled in. transformers leaves it null for a GGUF, and a server
    then picks the bare base model (vLLM 0.32: `LlamaModel`, no LM head: every logit equal)."""
    import json

    config = json.loads(source.read_text())
    if not config.get("architectures"):
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        arch = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.get("model_type"))
        if arch is None:
            raise UserError(f"no causal-LM class is known for model_type {config.get('model_type')!r}")
        config["architectures"] = [arch]
    text = json.dumps(config, indent=2)
    if not target.is_file() or target.is_symlink() or target.read_text() != text:
        target.unlink(missing_ok=True)
        target.write_text(text)


def main(argv: list[str]) -> int:
    try:
        ref = resolve_model(argv[0] if argv else None)
        if ref.kind != "gguf":
            raise UserError(f"{ref.location} is not a GGUF file", hint="a Hugging Face folder can be served as it is")
        print(export_hf_folder(ref.path))
    except UserError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
