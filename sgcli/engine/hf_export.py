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


def export_hf_folder(gguf: Path) -> Path:
    from sgcli.engine.loader import convert_gguf
    from sgcli.tokenizers.gguf import cached_tokenizer_dir

    model_dir = convert_gguf(gguf)
    tokenizer_dir = cached_tokenizer_dir(gguf)
    out = converted_dir(gguf) / "hf"
    out.mkdir(parents=True, exist_ok=True)
    for source in [*model_dir.iterdir(), *tokenizer_dir.iterdir()]:
        link = out / source.name
        if link.is_symlink() and link.resolve() == source.resolve():
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(source.resolve())
    return out


def main(argv: list[str]) -> int:
    from sgcli.engine.models import resolve_model
    from sgcli.errors import UserError

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
