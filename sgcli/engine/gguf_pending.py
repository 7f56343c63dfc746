"""A .gguf's weights made while the process does other work: `generate`'s warm start.

On the way to the first token the process loads the tokenizer, compiles the grammar and imports
torch, all on one core and holding the GIL (~1.2 s for the default model). The recipe's replay
(`gguf_recipe.fill`, numpy only) needs none of that, so a forked child runs it on another core,
into anonymous shared memory, and checks every weight it made (`gguf_recipe.value_problem`).
Measured on the default model (2-core Zen 5): the replay 0.17-0.21 s and the check 0.04 s leave
the path to the first token; reading the shared pages back costs this process ~0.06 s of page
faults. Mapping them ahead on a thread (MADV_POPULATE_READ) while torch imports gained nothing
there (1.802 against 1.786 s, 8 rounds each): it only moved the faults into torch's import.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sgcli.engine import gguf_recipe
from sgcli.limits import LimitHit, start_bounded

if TYPE_CHECKING:
    import torch


class PendingState:
    """`gguf_recipe.load_state`, started in a forked child now; `result()` once, or `cancel()`."""

    def __init__(self, folder: Path, gguf: Path):
        self._layout = gguf_recipe.layout(folder, gguf)
        self._memory = mmap.mmap(-1, max(4, self._layout.elements * 4))  # anonymous, shared with the child
        self._buffer = np.frombuffer(self._memory, dtype=np.float32, count=self._layout.elements)
        fill = lambda: gguf_recipe.fill_checked(self._layout, self._buffer)  # noqa: E731
        self._child = start_bounded(fill, timeout_s=0, memory_mb=0, helper=True)
        self.problem: str | None = None  # what the child's check found, once `result()` is in
        self.checked: np.ndarray | None = None  # the memory the child filled and checked, once taken

    @property
    def folder(self) -> Path:
        return self._layout.folder

    def result(self) -> dict[str, torch.Tensor]:
        """The state dict over the child's memory; whatever stopped the child (a damaged file, a
        crash) is met again here, where the in-process `load_state` raises it as itself."""
        try:
            self.problem = self._child.result()
        except LimitHit:
            return gguf_recipe.load_state(self._layout.folder, self._layout.gguf)
        self.checked = self._buffer
        return gguf_recipe.state(self._layout, self._buffer)

    def holds(self, tensor: torch.Tensor) -> bool:
        """Whether `tensor` lies in the memory the child filled and checked (a view of its weights)."""
        if self.checked is None:
            return False
        start, at = self.checked.ctypes.data, tensor.data_ptr()
        return start <= at and at + tensor.numel() * tensor.element_size() <= start + self.checked.nbytes

    def cancel(self) -> None:
        """Stop the child if it still runs (a no-op after `result()`)."""
        self._child.cancel()
