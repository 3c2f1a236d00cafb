"""Recipe rules for SWE rounds (patch mode and agent mode), run by ``RecipeAgent`` next to the math ones.

Each reads the digest's SWE fields (``meta_agent.digest``: ``format_error_rate``,
``resolve``-based ``verified_mean``, ``zero_variance_share``) and does not fire on other
domains, which lack them.

- ``swe-format-example``: most answers hold no parseable patch -> end the user prompt with a
  worked SEARCH/REPLACE example on a made-up file (no task's code, so nothing of a gold change
  can leak).  The reward is unchanged; the effect shows only in the next round's rollouts, so a
  merge is on probation (``format_error_rate decrease`` is a live digest field).
- ``swe-test-first``: agents submit without running a test, or repeat one command over and over
  (the seed's ``agent_behaviour`` findings) -> ask in the user prompt to run the tests that cover the
  change before submitting and to change course when a command keeps failing.  The reward is unchanged.
- ``swe-similarity-credit``: nothing resolves and groups are flat -> turn on SWE-RL's difflib
  similarity credit in ``reward.py``.  It gives a learning signal where there is none, and it pays
  unresolved patches by construction: the gate weighs that (``failure_pay``) like any reward change.
"""

from __future__ import annotations

import re

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipes import Change, HarnessFiles, below_threshold, overshoot

FORMAT_ERROR_THRESHOLD = 0.5
FLAT_THRESHOLD = 0.9
SIMILARITY_WEIGHT = 0.1
WEIGHT_LINE = re.compile(r"^SIMILARITY_WEIGHT = 0(?:\.0*)?[ \t]*$", re.MULTILINE)
FORMAT_EXAMPLE = """{# recipe: swe-format-example #}
Answer in this exact format. Example for a made-up file shop/cart.py where total() ignored the quantity:
shop/cart.py
<<<<<<< SEARCH
        total += item.price
=======
        total += item.price * item.quantity
>>>>>>> REPLACE
Copy the SEARCH lines exactly from the code above; change only what fixes the issue."""


HABIT_THRESHOLD = 0.3
HABIT_FINDINGS = ("no_test_before_submit", "repeated_commands")
TEST_FIRST_NOTE = """{# recipe: swe-test-first #}
Before you submit, run the tests that cover your change. If a command fails the same way twice, try \
something else instead of repeating it."""


def _finding_rates(d: dict, names: tuple[str, ...]) -> dict[str, float]:
    """The diagnostics' findings among ``names`` in the digest's failure modes, name -> rate."""
    return {str(m.get("name")): float(m.get("rate") or 0.0) for m in d.get("failure_modes") or []
            if m.get("name") in names and m.get("source") == "diagnostics"}


def _swe(d: dict) -> str | None:
    return None if isinstance(d.get("swe"), dict) else "not a SWE round (the digest has no swe section)"


def swe_format_example(d: dict, f: HarnessFiles) -> Change | str:
    """Most SWE answers are malformed -> show the answer format on a made-up example at the end of the user prompt."""
    if reason := _swe(d):
        return reason
    rate = d.get("format_error_rate")
    if isinstance(rate, int | float):  # an empty patch is no patch either (the seed's patch_outcomes finding)
        rate += _finding_rates(d, ("empty_patch",)).get("empty_patch", 0.0)
    if reason := below_threshold(rate, FORMAT_ERROR_THRESHOLD, "format_error_rate (+ empty_patch)"):
        return reason
    if "recipe: swe-format-example" in (f.user_prompt or ""):
        return "prompts/user.j2 already shows the example"
    prompt = (f.user_prompt if f.user_prompt is not None else "{{ question }}\n").rstrip("\n")
    return Change(
        "swe-format-example", "swe-format-example", overshoot(rate, FORMAT_ERROR_THRESHOLD),
        "Show a worked SEARCH/REPLACE example at the end of the user prompt",
        f"format_error_rate {rate:.3f} > {FORMAT_ERROR_THRESHOLD}.",
        "Most answers hold no parseable patch, so the grader never runs them and every group is flat. An "
        "example of the exact format, on a made-up file, as the last thing before the policy writes, makes "
        "well-formed edits likelier; the reward is unchanged, so no wrong patch is paid.",
        ["format_error_rate decrease: the prompt shows the answer format"],
        {"prompts/user.j2": prompt + "\n\n" + FORMAT_EXAMPLE + "\n"},
        f"swe section present and format_error_rate > {FORMAT_ERROR_THRESHOLD}",
    )


def swe_test_first(d: dict, f: HarnessFiles) -> Change | str:
    """Agents submit untested or repeat commands -> ask for a test run before submitting (prompt only)."""
    if reason := _swe(d):
        return reason
    rates = _finding_rates(d, HABIT_FINDINGS)
    if not rates:
        return "no agent-behaviour finding from the diagnostics"
    name, rate = max(rates.items(), key=lambda kv: kv[1])
    if reason := below_threshold(rate, HABIT_THRESHOLD, name):
        return reason
    if "recipe: swe-test-first" in (f.user_prompt or ""):
        return "prompts/user.j2 already asks for it"
    prompt = (f.user_prompt if f.user_prompt is not None else "{{ question }}\n").rstrip("\n")
    return Change(
        "swe-test-first", "swe-test-first", overshoot(rate, HABIT_THRESHOLD),
        "Ask the agent to run the covering tests before it submits",
        f"{name} {rate:.3f} > {HABIT_THRESHOLD}.",
        "Agents submit patches they never ran, or loop on one failing command until the step limit; both end "
        "unresolved. Asking for a test run before submitting, and a change of course after a repeated "
        "failure, makes resolved patches likelier; the reward is unchanged, so no failure is paid.",
        ["verified_mean increase: more patches are tested before they are submitted"],
        {"prompts/user.j2": prompt + "\n\n" + TEST_FIRST_NOTE + "\n"},
        f"swe section present and a diagnostics finding ({', '.join(HABIT_FINDINGS)}) > {HABIT_THRESHOLD}",
    )


def swe_similarity_credit(d: dict, f: HarnessFiles) -> Change | str:
    """Nothing resolves and groups are flat -> SWE-RL similarity credit for unresolved patches (the gate decides)."""
    if reason := _swe(d):
        return reason
    flat = d.get("zero_variance_share")
    if reason := below_threshold(flat, FLAT_THRESHOLD, "zero_variance_share"):
        return reason
    if (d.get("verified_mean") or 0.0) > 0:
        return f"verified_mean {d.get('verified_mean'):.3f}: some patches resolve, execution gives signal"
    if not f.reward or not WEIGHT_LINE.search(f.reward):
        return "reward.py has no 'SIMILARITY_WEIGHT = 0.0' line to turn on"
    reward = edits.check_python(WEIGHT_LINE.sub(f"SIMILARITY_WEIGHT = {SIMILARITY_WEIGHT}", f.reward, count=1),
                                "reward.py")
    return Change(
        "swe-similarity-credit", f"swe-similarity-credit:weight={SIMILARITY_WEIGHT}", overshoot(flat, FLAT_THRESHOLD),
        f"SWE-RL similarity credit ({SIMILARITY_WEIGHT} x difflib ratio to the gold change) for unresolved patches",
        f"zero_variance_share {flat:.3f} > {FLAT_THRESHOLD} with nothing resolved.",
        "No patch resolves, so every group's rewards are equal and GRPO has no signal. Paying unresolved "
        "patches in proportion to their closeness to the gold change (SWE-RL) separates them. It pays "
        "failures by construction: the gate's failure_pay check decides whether that is acceptable.",
        ["signal_share increase: similarity separates patches that all fail"],
        {"reward.py": reward},
        f"swe section present, zero_variance_share > {FLAT_THRESHOLD} and verified_mean == 0",
    )


SWE_RULES = (swe_format_example, swe_test_first, swe_similarity_credit)
SWE_REMEDIES: dict[str, tuple[str, ...]] = {
    "malformed_patches": ("swe-format-example",),
    "format_errors": ("swe-format-example",),
    "patch_does_not_apply": ("swe-format-example",),
    "empty_patch": ("swe-format-example",),
    **{name: ("swe-test-first",) for name in HABIT_FINDINGS},
}
