"""Held-out bad input for the exit-code rule, written after the CLI's refusals were frozen (issue 49).

None of these was in mind while ``tests/test_cli_exit_codes.py`` and its fixes were written: files where a
folder belongs, folders that cannot be made, a new run line whose options contradict its source's harness.
The rule is the same: exit 2, one stderr line naming what is wrong, nothing created.  Six of these 17
defeated the frozen code (committed as strict xfails in 3cd1e18: a file or an unmakeable folder as --run-dir
for a new run, a resume, the demo; report --out a file; a math line started as a code run) and were fixed after.
"""

from __future__ import annotations

import pytest

from test_cli_exit_codes import MISSING, NEW, R, T, case, refused_in_one_line, run  # noqa: F401 (run: a fixture)

AFILE = f"{T}/afile"  # a plain file where a folder is expected
UNMAKEABLE = "/proc/meta-agent-nope/run"  # a folder no one can create, even root

HELDOUT = [
    case("show", "--run-dir", R, said=("name",)),
    case("backtest", "iv/x", "--run-dir", R, "--ray-address", "127.0.0.1:1", said=("--groups all",)),
    case("backtest", "iv/x", "--run-dir", AFILE, said=(AFILE,)),
    case("--resume", "--run-dir", R, "--domain", "code", said=("cannot change --domain",)),
    case("--rounds", "-1", "--run-dir", NEW, said=("--rounds",), absent=NEW),
    case("--budget-cost", "nan", "--run-dir", NEW, said=("--budget-cost",), absent=NEW),
    case("--api-base", "http://127.0.0.1:9", "--run-dir", NEW, said=("--api-base", "--agent llm"), absent=NEW),
    case("demo", "--run-dir", AFILE, said=(AFILE,)),
    case("history", "--run-dir", "", said=("holds no run",)),
    case("tasks", "check", T, said=(T,)),
    case("tasks", "import-swebench", AFILE, "--repo-path", AFILE, said=("--repo-path",)),
    case("--run-dir", AFILE, said=(AFILE,)),
    case("--resume", "--run-dir", AFILE, said=(AFILE,)),
    case("--run-dir", UNMAKEABLE, said=(UNMAKEABLE,)),
    case("demo", "--run-dir", UNMAKEABLE, said=(UNMAKEABLE,)),
    case("report", "--run-dir", R, "--out", AFILE, said=(AFILE, "--out")),
    case("--from-run", R, "--from-branch", "main", "--domain", "code", "--run-dir", NEW, "--dry-run",
         said=("--domain", "math"), absent=NEW),
]


@pytest.mark.parametrize("args, said, absent", HELDOUT)
def test_heldout_bad_input_exits_2_with_one_line(run, tmp_path, args, said, absent):  # noqa: F811
    refused_in_one_line(run, tmp_path, args, said, absent)
