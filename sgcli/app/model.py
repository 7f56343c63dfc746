"""Which model runs, where and how: the model flags as one typed value, checked once, loaded here."""

from __future__ import annotations

from dataclasses import dataclass

from sgcli import tokenizers
from sgcli.bounds import check_setting
from sgcli.engine import loader
from sgcli.engine.flags import check_device, parse_device_map
from sgcli.extras import require
from sgcli.models.refs import resolve_model


@dataclass(frozen=True)
class ModelOptions:
    """The in-process model: `--model` and the flags that place and run it, as given."""

    model: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None
    revision: str | None = None
    trust_remote_code: bool = False
    device_map: str | None = None
    gguf_file: str | None = None
    model_impl: str = "auto"
    kernel: str = "auto"

    def check(self) -> None:
        """The model flags in range (a device this machine has, a readable --device-map), or exit 2;
        only --device cuda/mps imports torch."""
        check_device(self.device)
        parse_device_map(self.device_map, self.device)
        if self.threads is not None:
            check_setting("threads", self.threads, least=1)

    def local_only(self) -> dict[str, object]:
        """The flags that only the in-process model reads, as given (a server has its own model)."""
        return {
            "--revision": self.revision,
            "--trust-remote-code": self.trust_remote_code,
            "--device-map": self.device_map,
            "--gguf-file": self.gguf_file,
            "--model-impl": None if self.model_impl == "auto" else self.model_impl,
            "--kernel": None if self.kernel == "auto" else self.kernel,
        }

    def ref(self):
        """The model reference (a --gguf-file is downloaded here). A missing [generate] extra is named
        first: installing the model alone would only lead to that error next."""
        require("generate", "running a model")
        return resolve_model(
            self.model, revision=self.revision, gguf_file=self.gguf_file, trust_remote_code=self.trust_remote_code
        )

    def tokenizer(self, progress=None):
        """The model's own tokenizer, from the same revision / GGUF file."""
        return tokenizers.load_tokenizer(
            self.model, progress=progress, revision=self.revision, gguf_file=self.gguf_file, flag="--model"
        )

    def start_weights(self, ref):
        """The .gguf's weights, dequantized from now on in a child on another core (`loader.start_weights`),
        for `load(pending=...)`; None where there is nothing to start."""
        return loader.start_weights(ref, parse_device_map(self.device_map, self.device))

    def load(self, ref, progress=None, pending=None):
        device_map = parse_device_map(self.device_map, self.device)
        return loader.load_model(
            ref,
            device=self.device,
            dtype=self.dtype,
            progress=progress,
            threads=self.threads,
            device_map=device_map,
            impl=self.model_impl,
            kernel=self.kernel,
            pending=pending,
        )
