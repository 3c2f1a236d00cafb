"""The recipe table's shared types: what a rule reads (``HarnessFiles``), what it proposes (``Change``),
and the helpers that rank a signal past its threshold.

    from meta_agent.agents.recipe_types import Change, HarnessFiles, Decision, Rule
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent.agents import recipe_edits as edits


@dataclass
class HarnessFiles:
    """The texts of ``main``'s files the rules read (None where a file is absent)."""

    config_text: str
    reward: str | None
    user_prompt: str | None
    filters: str | None = None
    diagnostics: dict[str, str] = field(default_factory=dict)
    """stem -> text of main's ``diagnostics/<stem>.py``, each diagnostic main holds (the seed's and its own)."""
    system_prompt: str | None = None

    @classmethod
    def read(cls, repo: HarnessRepo, ref: str = "main") -> HarnessFiles:
        def text(path: str) -> str | None:
            try:
                return repo.read_file(ref, path)
            except HarnessError:
                return None

        config_text = repo.read_file(ref, "harness.yaml")
        diagnostics = {path.removeprefix("diagnostics/").removesuffix(".py"): t
                       for path in repo.files_in(ref, "diagnostics") if path.endswith(".py")
                       and (t := text(path)) is not None}
        return cls(config_text, text("reward.py"), text("prompts/user.j2"), text("filters.py"), diagnostics,
                   text("prompts/system.j2"))

    @property
    def config(self) -> dict:
        return edits.load_config(self.config_text)


@dataclass
class Change:
    """What a rule would commit: the new file texts and the proposal around them."""

    rule: str
    key: str
    """Identifies the change itself (rule plus new values), recorded as a trailer."""
    strength: float
    """How far the signal is past its threshold, 0..1; ranks the rules."""
    subject: str
    evidence: str
    hypothesis: str
    effects: list[str]
    """``Predicted-Effect`` lines: at least one benefit (increase/decrease) the change can deliver; a
    diagnostics-only change predicts the findings it adds instead (``finding <name> added: why``)."""
    files: dict[str, str] = field(default_factory=dict)
    trigger: str = ""
    """The condition on digest fields that fired the rule (the ``Trigger`` trailer, read by skills)."""
    root_cause: bool = False
    """It fixes a cause that makes other modes follow (an answer cut off, left unpaid or filtered out cannot
    give a group signal or a final line): ranked ahead of changes that treat those modes."""


Decision = Change | str  # a str says why the rule did not fire
Rule = Callable[[dict, HarnessFiles], Decision]


def overshoot(value: float, threshold: float) -> float:
    return max(0.0, min(1.0, (value - threshold) / max(1.0 - threshold, 1e-9)))


def below_threshold(value: object, threshold: float, name: str) -> str | None:
    if not isinstance(value, int | float):
        return f"{name} is unknown"
    if value <= threshold:
        return f"{name} {value:.3f} is not above {threshold}"
    return None
