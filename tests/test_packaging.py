"""A non-editable install carries what the code reads at run time: the agent's prompts and the seed harnesses.

The wheel is built offline from a copy of the checkout with the project's own build tools, installed into a
fresh virtual environment that borrows only the dependencies, and exercised from a folder outside the checkout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGENT_PROMPTS = ["agent_digest.md.j2", "agent_proposal.md.j2", "agent_system.md.j2", "digest.md.j2"]
CHECK = """
import sys
from pathlib import Path
import meta_agent
from meta_agent.templates import environment
from harness_repo.repo import HarnessRepo

site = Path(sys.argv[1])
assert Path(meta_agent.__file__).is_relative_to(site), meta_agent.__file__
for name in sys.argv[2:]:
    template = environment().get_template(name)
    assert Path(template.filename).is_relative_to(site), template.filename
repo = HarnessRepo.create(Path("harness"), "math")
print("ok", repo.config("main").domain)
"""


def test_a_wheel_install_has_the_prompts_and_seeds(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv*", ".git", "build", "*.egg-info", "runs",
                                                                  "__pycache__", ".pytest_cache", "tests"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "dist"), str(source)], check=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("meta_agent-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # no .pth of it runs
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=600)
    work = tmp_path / "elsewhere"
    work.mkdir()
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK, str(site), *AGENT_PROMPTS], cwd=work,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ok", "math"]
