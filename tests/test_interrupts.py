"""Ctrl-C and SIGTERM end `sgcli` even while its main thread is inside a native call that never returns
(`cli/launch.py`): llguidance's first mask of `start: /a+/ "a"` held `sgcli masks` and `convert` until
SIGKILL, and `timeout`'s SIGTERM did nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# The main thread in a native call that gives up the GIL and never gets back to Python, as llguidance's
# loop does: libc's sleep, with the signals blocked in that thread so that none ends the sleep early.
_STUCK_MASK = """
import ctypes, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job's SIGINT would be ignored
import sgcli.backends.llguidance_backend as lb
grammar, inside = sys.argv[1:3]

def stuck(self, *args):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    open(inside, "w").close()
    ctypes.CDLL(None).sleep(60)

lb.LLGuidanceMatcher.fill_mask = lb.LLGuidanceMatcher.mask_bytes = stuck
sys.argv = ["sgcli", "masks", grammar, "-b", "llguidance", "--text", "a", "--compile-timeout", "0"]
from sgcli.cli.launch import main
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_the_process_while_the_main_thread_is_stuck_in_native_code(tmp_path, sig):
    grammar, inside = tmp_path / "g.lark", tmp_path / "inside"
    grammar.write_text('start: "a"\n')
    child = subprocess.Popen(
        [sys.executable, "-c", _STUCK_MASK, str(grammar), str(inside)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not inside.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert inside.exists(), child.communicate()[1]
        child.send_signal(sig)
        _, err = child.communicate(timeout=30)  # the stuck call lasts 60 s
    finally:
        child.kill()
    assert child.returncode == 128 + sig, err  # 130 for Ctrl-C, 143 for SIGTERM, as shells report them
    assert err.strip().endswith("interrupted") and "Traceback" not in err, err
