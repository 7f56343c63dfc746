"""Hub access that fails fast offline: one short reachability probe instead of ~40 s of retries.

Offline (HF_HUB_OFFLINE set, or the hub's host unreachable within PROBE_S seconds), hub
files come from the local hub cache only, and a missing one is an error at once.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from sgcli.errors import UserError

PROBE_S = 3.0
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def offline_by_setting() -> bool:
    """HF_HUB_OFFLINE asks for the local hub cache only, whatever the network."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


@functools.lru_cache(maxsize=1)
def offline() -> bool:
    """True when the hub cannot be reached (a proxy is trusted: the probe cannot see through it)."""
    if offline_by_setting():
        return True
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=PROBE_S):
            return False
    except OSError:
        return True


def hub_options() -> dict:
    """Keyword arguments for huggingface_hub / from_pretrained: the local cache only when offline."""
    return {"local_files_only": True} if offline() else {}


def offline_error(repo: str, what: str) -> UserError:
    if offline_by_setting():
        return UserError(
            f"HF_HUB_OFFLINE is set, so sgcli reads the local hub cache only, and '{repo}' has no {what} there",
            hint="unset HF_HUB_OFFLINE to download it, or pass a local model folder or .gguf file",
        )
    return UserError(
        f"the Hugging Face hub is not reachable and '{repo}' has no {what} in the local hub cache",
        hint="connect to the network, or pass a local model folder or .gguf file (HF_HUB_OFFLINE=1 skips the probe)",
    )


def hub_file(repo: str, filename: str, *, revision: str | None = None, optional: tuple[str, ...] = ()) -> Path:
    """A file of a hub repository at `revision` (branch, tag or commit; default: main), downloaded if the
    network allows, with the `optional` files beside it fetched where they exist."""
    try:
        from huggingface_hub import hf_hub_download

        path = Path(hf_hub_download(repo, filename, revision=revision, **hub_options()))
        for extra in optional:
            try:
                hf_hub_download(repo, extra, revision=revision, **hub_options())
            except Exception:  # optional files
                pass
        return path
    except Exception as exc:
        if offline():
            raise offline_error(repo, filename) from None
        at = f" at revision '{revision}'" if revision else ""
        raise UserError(
            f"cannot fetch {filename} of '{repo}'{at} from the Hugging Face hub: {type(exc).__name__}",
            hint="check the id, the revision, your network and HF_TOKEN, or pass a local directory",
        ) from None
