"""The import direction: the lower layers never import the controller (``meta_agent``).

``rl_backend``, ``harness_repo``, ``sandboxes`` and ``swe_env`` are read statically, every ``.py`` file
of every subpackage (``rl_backend/verl`` too, whose modules import verl and Ray and cannot be loaded
here), and every import statement counts -- a function-level ``from meta_agent ... import`` as much as
one at the top.  ``test_rows.test_rl_backend_imports_nothing_from_meta_agent`` checks the same at run
time for the modules that load without a GPU stack.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOWER = ("rl_backend", "harness_repo", "sandboxes", "swe_env")


def absolute_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every ``import x`` and absolute ``from x import y`` in ``path``, at any depth (function bodies too)."""
    return [node for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module)]


def controller_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line module`` (file relative to ``root``) for each import of ``meta_agent`` or a submodule."""
    found = []
    for node in absolute_imports(path):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            names = [node.module]
        found += [f"{path.relative_to(root)}:{node.lineno} {n}" for n in names if n.split(".")[0] == "meta_agent"]
    return found


def test_the_checker_sees_a_nested_import(tmp_path):
    """The adversary: an import hidden in a function body, and one that only looks like it."""
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n\ndef later():\n    from meta_agent.errors import UserError\n"
                      "    import meta_agentish\n    return UserError\n")
    assert controller_imports(sample, tmp_path) == ["sample.py:4 meta_agent.errors"]


@pytest.mark.parametrize("package", LOWER)
def test_lower_layer_never_imports_meta_agent(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package} has no Python files: the check would pass vacuously"
    leaks = [hit for path in files for hit in controller_imports(path)]
    assert leaks == []


PACKAGES = ("meta_agent", *LOWER)


def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line module.name`` for each ``from <project module> import _name``: another module's private name."""
    found = []
    for node in absolute_imports(path):
        if isinstance(node, ast.ImportFrom) and node.module.split(".")[0] in PACKAGES:
            found += [f"{path.relative_to(root)}:{node.lineno} {node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_the_private_name_checker_sees_one(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from meta_agent.digest import HIGH, _num\nfrom os import _exit\n"
                      "def f():\n    from sandboxes.docker import __doc__\n")
    assert private_imports(sample, tmp_path) == ["sample.py:1 meta_agent.digest._num"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_another_modules_private_names(package):
    """Issue 9: a module that needs another's helper gets a public name, not a reach into its privates."""
    leaks = [hit for path in sorted((ROOT / package).rglob("*.py")) for hit in private_imports(path)]
    assert leaks == []
