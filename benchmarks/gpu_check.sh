#!/usr/bin/env bash
# GPU check for a session lent a GPU machine (none was lent when this was written).
#
# Step 1, HERE (CPU machine, repo root): build the bundle that travels (wheels the GPU image
# lacks, the default model's tokenizer and config; ~40 MiB, under the 64 MiB a call carries):
#     bash benchmarks/gpu_check.sh prepare
# Step 2, THERE, through the device tool's `run`, carrying `.gpu`:
#     bash benchmarks/gpu_check.sh
# It installs the wheels, runs one constrained generation on CUDA in bf16 through sgcli's own
# Session (validated), then the benchmark rows (jump-forward / plain / unconstrained per
# backend; sgcli vs transformers generate + xgrammar's LogitsProcessor). Output lands in
# $OUT/gpu_check.txt; copy the figures into docs/performance.md.
#
# The GGUF of the default model (98 MB) does not fit in one call, so the GPU model has the
# default model's architecture (config.json) with random weights: forward-pass speed is the
# same, but a random model writes forced text in its own tokenization, so jump-forward keeps
# fewer draft tokens than SmolLM2's trained weights would (the rows print forced_tokens).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "prepare" ]]; then
    exclude="$(git rev-parse --git-path info/exclude)"
    grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
    rm -rf .gpu && mkdir -p .gpu/whl
    PY=${PY:-python3}
    "$PY" - <<'PY'
import json, shutil
from pathlib import Path
from sgcli.engine.gguf_convert import convert_gguf
from sgcli.models.refs import resolve_model
from sgcli.tokenizers import load_tokenizer
from sgcli.tokenizers.gguf import cached_tokenizer_dir

ref = resolve_model(None)
load_tokenizer(None)
shutil.copytree(cached_tokenizer_dir(ref.path, None), ".gpu/tokenizer")
shutil.copy(convert_gguf(ref.path) / "config.json", ".gpu/config.json")
print("tokenizer and config in .gpu/")
PY
    # the grammar libraries, and what sgcli imports that the GPU image lacks (its records' pydantic,
    # the format checkers jsonschema uses): found by running this check on a CPU and listing sys.modules
    for pkg in xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2 llguidance==1.9.1 outlines_core==0.2.14 \
        jsonschema==4.26.0 referencing==0.37.0 rpds-py==2026.9.1 jsonschema-specifications==2025.9.1 lark \
        pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
        rfc3339-validator==0.1.4 rfc3986-validator==0.1.1 fqdn==1.6.0 isoduration==20.11.0 arrow==1.4.0 \
        jsonpointer==3.12 uri-template==1.3.0 tzdata==2026.6; do
        "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_35_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .gpu/whl "$pkg"
    done
    du -sh .gpu
    exit 0
fi

OUT=${OUT:-/tmp/gpu_check_out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 SGCLI_CACHE_DIR=/tmp/sgcli-cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu_check.txt"
python3 benchmarks/gpu_check.py --bundle .gpu "$@" 2>&1 | tee -a "$OUT/gpu_check.txt"
