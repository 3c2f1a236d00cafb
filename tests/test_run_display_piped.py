"""A piped run (a log file, CI, ``| tee``) prints a line per phase and per training step: a progress bar draws
nothing there, so the console had shown only ``round 0 · train`` for the first minutes (issue 48)."""

from __future__ import annotations

import io

from rich.console import Console

from meta_agent.run_display import ConsoleEvents


def test_a_piped_console_gets_a_line_per_phase_and_training_step() -> None:
    out = io.StringIO()
    events = ConsoleEvents(Console(file=out, width=100))  # a file: not a terminal
    events.phase(0, "train")
    for step in (1, 2, 3):
        events.train_step(step, 3, {"reward": 0.125 * step})
    events.phase(0, "diagnose")
    lines = out.getvalue().splitlines()
    assert lines[0] == "round 0 · train" and lines[-1] == "round 0 · diagnose"
    steps = [line for line in lines if line.startswith("  training step")]
    assert [s.split(" · ")[:2] for s in steps] == [["  training step 1/3", "reward 0.125"],
                                                   ["  training step 2/3", "reward 0.250"],
                                                   ["  training step 3/3", "reward 0.375"]]
    assert all(s.endswith("s into the phase") for s in steps) and len(steps) == 3
    assert events.trained == [0] and set(events.seconds) == {"train"}
