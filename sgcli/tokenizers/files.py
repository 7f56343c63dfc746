"""Reading a tokenizer's files: each read bounded, each refusal exit 2 naming the file.

Tokenizer folders come with downloaded models (untrusted): a folder, a FIFO, a link to /dev/zero or a
file of gigabytes may stand where tokenizer.json, tekken.json, a SentencePiece model, a config or a
chat template should be.
"""

from __future__ import annotations

from pathlib import Path

from sgcli.errors import UserError
from sgcli.regular_files import FileTooLarge, read_regular

# The largest vocabulary file a real model ships is about 33 MB (Gemma 3's tokenizer.json, 262k tokens);
# a 69 MB one took 44 s and 1.6 GB to load. Past this, a file beside or of a tokenizer is refused unread.
TOKENIZER_FILE_MAX_BYTES = 64 << 20


def read_tokenizer_file(path: Path) -> bytes:
    """The bytes of a tokenizer file (tokenizer.json, tekken.json, a SentencePiece model, a config or
    template beside them), only when it is a regular file within TOKENIZER_FILE_MAX_BYTES: a folder,
    a FIFO, /dev/zero or an oversized file in its place is exit 2 naming it."""
    try:
        return read_regular(path, TOKENIZER_FILE_MAX_BYTES)
    except FileTooLarge:
        raise UserError(
            f"{path} is over {TOKENIZER_FILE_MAX_BYTES:,} bytes, more than any tokenizer file sgcli reads "
            "(the largest real vocabulary, Gemma 3's 262k tokens, is a 33 MB tokenizer.json)",
            hint="pass the tokenizer file of a trained model",
        ) from None
    except OSError as exc:
        raise UserError(
            f"cannot read {path}: {exc.strerror or exc}", hint=f"put a tokenizer file there, or remove {path.name}"
        ) from None
