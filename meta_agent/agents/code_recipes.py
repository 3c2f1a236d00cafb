"""Recipe rules for code rounds, run by ``RecipeAgent`` next to the general ones when the digest has a code section.

Each reads the digest's ``code`` section (``domains.code_digest``) or the seed diagnostics'
findings among its failure modes, and does not fire on other domains.

- ``code-format-example``: many answers hold no code, an unclosed fence or a syntax error -> end the
  user prompt with a worked example of the answer format on a made-up function (no task's code or
  outputs, so nothing hidden can leak).  The reward is unchanged.
- ``code-return-prompt``: the diagnostics see the known hacks and failures of function-writing
  (hard-coded outputs, printing instead of returning, catching every exception, early exits) ->
  say in the user prompt what the grader wants: a value computed from the arguments, returned,
  errors left to raise.  The reward is unchanged, so no hack is paid either way.
- ``code-limits-prompt``: programs are killed by the grader's limits (timeouts, memory, output) or use
  forbidden operations (files, network, processes) -> say in the user prompt that the program must
  finish quickly in plain Python.  The reward is unchanged; the grader already fails such programs.
- ``code-share-credit``: nothing passes and groups are flat -> pay the share of hidden tests
  passed (``SHARE_WEIGHT`` in ``reward.py``).  It pays wrong programs by construction (one that
  hard-codes the shown example passes one test): the gate's failure-pay check decides.
"""

from __future__ import annotations

import re

from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipes import Change, HarnessFiles, below_threshold, overshoot

FORMAT_THRESHOLD = 0.3
HACK_THRESHOLD = 0.1
FLAT_THRESHOLD = 0.9
SHARE_WEIGHT = 0.2
HACK_FINDINGS = ("hard_coded_outputs", "print_instead_of_return", "catch_all_exceptions", "early_exit")
WEIGHT_LINE = re.compile(r"^SHARE_WEIGHT = 0(?:\.0*)?[ \t]*$", re.MULTILINE)
FORMAT_EXAMPLE = """{# recipe: code-format-example #}
Answer in this exact format. Example for a made-up task "return the larger of a and b":
```python
def larger(a, b):
    return a if a > b else b
```"""
FORMAT_FINDINGS = ("missing_function", "load_errors")
"""Seed diagnostics' findings of answers that never reach the tests for want of a loadable function."""
LIMITS_THRESHOLD = 0.2
LIMIT_FIELDS = ("timeout_rate", "forbidden_rate")
LIMIT_FINDINGS = ("timeouts", "resource_limits", "forbidden_operations")
LIMITS_NOTE = """{# recipe: code-limits-prompt #}
Use plain Python only: no files, network, subprocesses or exits. The program must finish quickly: no \
unbounded loops, no huge lists or outputs."""
RETURN_NOTE = """{# recipe: code-return-prompt #}
Compute the result from the arguments and return it: do not print it, do not copy the example's output, \
and do not catch exceptions to hide errors."""


def _code(d: dict) -> dict | str:
    code = d.get("code")
    return code if isinstance(code, dict) else "not a code round (the digest has no code section)"


def _prompt(f: HarnessFiles) -> str:
    return (f.user_prompt if f.user_prompt is not None else "{{ question }}\n").rstrip("\n")


def _finding_rates(d: dict, names: tuple[str, ...]) -> dict[str, float]:
    """The diagnostics' findings among ``names`` in the digest's failure modes, name -> rate."""
    return {str(m.get("name")): float(m.get("rate") or 0.0) for m in d.get("failure_modes") or []
            if m.get("name") in names and m.get("source") == "diagnostics"}


def code_format_example(d: dict, f: HarnessFiles) -> Change | str:
    """Many answers hold no runnable code -> show the answer format on a made-up function."""
    code = _code(d)
    if isinstance(code, str):
        return code
    rate = sum(code.get(k) or 0.0 for k in ("no_code_rate", "truncated_rate", "syntax_error_rate"))
    rate += sum(_finding_rates(d, FORMAT_FINDINGS).values())  # no function, or one that does not load
    if reason := below_threshold(rate, FORMAT_THRESHOLD, "no_code + truncated + syntax_error (+ missing_function + "
                                 "load_errors) rate"):
        return reason
    if "recipe: code-format-example" in (f.user_prompt or ""):
        return "prompts/user.j2 already shows the example"
    return Change(
        "code-format-example", "code-format-example", overshoot(min(rate, 1.0), FORMAT_THRESHOLD),
        "Show a worked example of the answer format at the end of the user prompt",
        f"no code, truncated or syntax errors in {rate:.3f} of graded answers (> {FORMAT_THRESHOLD}).",
        "Answers without a complete, parseable function never reach the tests, so their groups are flat. A "
        "short example of a fenced function, on a made-up task, as the last thing before the policy writes, "
        "makes runnable answers likelier; the reward is unchanged, so no wrong program is paid.",
        ["verified_mean increase: more answers are runnable programs"],
        {"prompts/user.j2": _prompt(f) + "\n\n" + FORMAT_EXAMPLE + "\n"},
        f"code section present and no_code + truncated + syntax_error rate > {FORMAT_THRESHOLD}",
    )


def code_return_prompt(d: dict, f: HarnessFiles) -> Change | str:
    """The diagnostics report hard-coding, printing, catch-alls or early exits -> say what the grader wants."""
    if isinstance(_code(d), str):
        return _code(d)
    rates = {m.get("name"): m.get("rate") or 0.0 for m in d.get("failure_modes") or []
             if m.get("name") in HACK_FINDINGS and m.get("source") == "diagnostics"}
    if not rates:
        return "no hack finding from the diagnostics"
    name, rate = max(rates.items(), key=lambda kv: kv[1])
    if reason := below_threshold(rate, HACK_THRESHOLD, name):
        return reason
    if "recipe: code-return-prompt" in (f.user_prompt or ""):
        return "prompts/user.j2 already says it"
    return Change(
        "code-return-prompt", "code-return-prompt", overshoot(rate, HACK_THRESHOLD),
        "Say in the user prompt that the function must return a computed value and let errors raise",
        f"{name} in {rate:.3f} of graded programs (> {HACK_THRESHOLD}).",
        "The policy answers with programs that print, hard-code the shown example, swallow errors or exit "
        "early; none of them passes the grader. Saying what is graded, before the policy writes, steers it "
        "to returning a computed value; the reward is unchanged, so no hack is paid.",
        [f"verified_mean increase: fewer {name.replace('_', ' ')}"],
        {"prompts/user.j2": _prompt(f) + "\n\n" + RETURN_NOTE + "\n"},
        f"code section present and a diagnostics hack finding ({', '.join(HACK_FINDINGS)}) > {HACK_THRESHOLD}",
    )


def code_limits_prompt(d: dict, f: HarnessFiles) -> Change | str:
    """Programs time out, exhaust limits or use forbidden operations -> say in the prompt what the grader allows."""
    code = _code(d)
    if isinstance(code, str):
        return code
    rates = {k: float(code.get(k) or 0.0) for k in LIMIT_FIELDS} | _finding_rates(d, LIMIT_FINDINGS)
    name, rate = max(rates.items(), key=lambda kv: kv[1])
    threshold = 0.0 if "forbidden" in name else LIMITS_THRESHOLD  # any forbidden operation is one too many
    if reason := below_threshold(rate, threshold, name):
        return reason
    if "recipe: code-limits-prompt" in (f.user_prompt or ""):
        return "prompts/user.j2 already says it"
    return Change(
        "code-limits-prompt", "code-limits-prompt", overshoot(min(rate, 1.0), threshold),
        "Say in the user prompt that the program must be plain, quick Python",
        f"{name} {rate:.3f} of graded programs.",
        "Programs that run too long, exhaust memory or output, or touch files, network or processes are "
        "killed or refused by the grader and score 0 whatever their logic. Saying what the grader allows, "
        "before the policy writes, makes gradable programs likelier; the reward is unchanged.",
        ["verified_mean increase: fewer programs killed or refused by the grader's limits"],
        {"prompts/user.j2": _prompt(f) + "\n\n" + LIMITS_NOTE + "\n"},
        f"code section present and timeout or limit rate > {LIMITS_THRESHOLD}, or forbidden operations > 0",
    )


def code_share_credit(d: dict, f: HarnessFiles) -> Change | str:
    """Nothing passes and groups are flat -> pay the share of tests passed (the gate decides)."""
    code = _code(d)
    if isinstance(code, str):
        return code
    flat = d.get("zero_variance_share")
    if reason := below_threshold(flat, FLAT_THRESHOLD, "zero_variance_share"):
        return reason
    if (d.get("verified_mean") or 0.0) > 0:
        return f"verified_mean {d.get('verified_mean'):.3f}: some programs pass, execution gives signal"
    if not code.get("mean_test_share"):
        return "no program passes any test: a share credit would be flat too"
    if not f.reward or not WEIGHT_LINE.search(f.reward):
        return "reward.py has no 'SHARE_WEIGHT = 0.0' line to turn on"
    reward = edits.check_python(WEIGHT_LINE.sub(f"SHARE_WEIGHT = {SHARE_WEIGHT}", f.reward, count=1), "reward.py")
    return Change(
        "code-share-credit", f"code-share-credit:weight={SHARE_WEIGHT}", overshoot(flat, FLAT_THRESHOLD),
        f"Pay {SHARE_WEIGHT} x the share of hidden tests passed to programs that do not pass them all",
        f"zero_variance_share {flat:.3f} > {FLAT_THRESHOLD} with no program passing every test.",
        "No program passes every test, so every group's rewards are equal and GRPO has no signal. Paying "
        "the share of tests passed separates programs that are partly right. It pays failures by "
        "construction: the gate's failure_pay check decides whether that is acceptable.",
        ["signal_share increase: the share of tests separates programs that all fail"],
        {"reward.py": reward},
        f"code section present, zero_variance_share > {FLAT_THRESHOLD} and verified_mean == 0",
    )


CODE_RULES = (code_format_example, code_return_prompt, code_limits_prompt, code_share_credit)
CODE_REMEDIES: dict[str, tuple[str, ...]] = {
    "code_no_code": ("code-format-example",),
    "code_syntax_errors": ("code-format-example",),
    "code_truncated": ("code-format-example", "truncation"),
    "no_code": ("code-format-example",),
    "syntax_errors": ("code-format-example",),
    "truncated_code": ("code-format-example", "truncation"),
    **{name: ("code-format-example",) for name in FORMAT_FINDINGS},
    **{name: ("code-return-prompt",) for name in HACK_FINDINGS},
    **{name: ("code-limits-prompt",) for name in ("code_timeouts", "code_forbidden", *LIMIT_FINDINGS)},
}
