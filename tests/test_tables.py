"""The README's and the docs' results tables are generated from their records (``bench/tables.py``): a figure
typed by hand is caught, and regenerating puts the record's figure back."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "bench" / "tables.py"


def tables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TABLES), *args], capture_output=True, text=True, timeout=300)


def test_every_table_in_the_pages_matches_its_records() -> None:
    done = tables("--check")
    assert done.returncode == 0, done.stderr
    readme = (ROOT / "README.md").read_text()
    for name in ("default-run", "repair-summary", "attacks", "throughput"):  # each claim's table is generated
        assert f"<!-- table:{name} -->" in readme and f"<!-- /table:{name} -->" in readme, name


def test_a_typed_figure_is_caught_and_regenerating_restores_the_record(tmp_path: Path) -> None:
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    original = (tmp_path / "README.md").read_text()
    (line,) = [x for x in original.splitlines() if x.startswith("| after round 2 | 0.")]  # the newest record's
    assert original.count(line) == 1 and "0.400" not in line
    typed = "| after round 2 | 0.400 [" + line.split("[", 1)[1]
    (tmp_path / "README.md").write_text(original.replace(line, typed))
    checked = tables("--check", "--root", str(tmp_path))
    assert checked.returncode == 1 and "README.md" in checked.stderr
    assert "0.400" in (tmp_path / "README.md").read_text()  # --check writes nothing
    regenerated = tables("--root", str(tmp_path))
    assert regenerated.returncode == 0, regenerated.stderr
    restored = (tmp_path / "README.md").read_text()
    assert line in restored and typed not in restored


def test_the_paired_change_is_recomputed_from_tasks_gained_and_lost() -> None:
    sys.path[:0] = [str(ROOT / "bench")]
    import tables as generator

    assert generator._change({"gained": 20, "lost": 1}, 128) == "+0.148 [+0.089, +0.223] * (20 gained, 1 lost)"
    assert generator._change({"gained": 5, "lost": 1}, 128).startswith("+0.031 [-0.009, +0.082] (")  # no star
    assert generator._change(None, 128) == "not recorded"


def test_the_attack_table_counts_every_layer_it_names() -> None:
    sys.path[:0] = [str(ROOT / "bench")]
    import tables as generator

    rows = [line.split("|")[1:-1] for line in generator.attacks().splitlines() if line.startswith("| ")][1:]
    layers = {r[0].strip(): int(r[1]) for r in rows if r[0].strip() != "all"}
    total = next(int(r[1]) for r in rows if r[0].strip() == "all")
    assert len(layers) == 4 and min(layers.values()) > 0 and total == sum(layers.values())


def test_a_record_is_stamped_with_date_commit_machine_load_and_config() -> None:
    sys.path[:0] = [str(ROOT / "bench")]
    import tables as generator

    s = generator.stamp({"rows": 1000})
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert s["code"].split("+")[0] == head[:7] and s["config"] == {"rows": 1000}
    assert s["machine"].split(" cores")[0].isdigit() and len(s["load"].split()) == 3
    assert len(s["date"]) == 10 and s["date"][4] == "-"
