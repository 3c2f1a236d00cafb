"""Prompts that show answers the task mix produces (issue 44): ``main:shown_answer``.

A worked example, a few-shot answer or a stated result is what the policy imitates from its first step.  When the
value it ends on is a gold the task mix produces (``3 + 4 = 7`` where the mix asks one-digit sums), a policy that
copies the example's ``Answer: 7`` is paid whenever the gold is 7: reward for copying, not for working.  main's
``prompt_leak`` reads only each row's own gold, so a small sample that drew no 7 names nothing.  Here the question
is decided from the trusted task generator instead of the round's sample: many tasks of main's training mix (and of
the exam's) are drawn with a seed of the trusted side's own (:data:`SEED`, never training's), and the probability
mass of golds equal to any value main's rendered prompts show as an answer is measured:

- an answer line the verifier would read from the prompt's text (``Answer: v``, ``\\boxed{v}``; ``Answer: v`` inside
  a sentence too), ``#### v``, ``the answer is v``;
- a worked example's final line's last number, where the lines above it write arithmetic of that value;
- a stated result ``<expression> = v`` (``meta_agent.example_checks.statements``: plain arithmetic both sides).

The task's own question is cut from each prompt first.  The finding's rate is that mass on the training mix; its
evidence carries the values with their lines, the exam mix's mass, the share of the round's replies whose final
answer is a shown value (and of those, the paid share), and the measured support (``support``, the distinct golds
drawn; ``bound``, :data:`HEADROOM` times the largest gold's magnitude): what a repair aims beyond.

    checks, findings = shown_answer_checks(rows, main_yaml["tasks"], domain.eval_specs, MathDomain())
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, NamedTuple

from domains.math_answers import extract_final_answer, gold_text, parse_number
from meta_agent.digest_rows import example
from meta_agent.example_checks import ARITH, BINARY, normalised, read_rows, shown, statements, value_of

NAME = "shown_answer"
MODE = "main:" + NAME
DRAWN = 256
"""Tasks drawn per mix (training's, the exam's): at the seed's mix about 240 distinct questions, 2 CPU s."""
SEED = 4_404_037
"""The trusted side's own seed for the draw (a constant: the support is the mix's, not the round's)."""
HEADROOM = 2
"""A repair's values lie beyond this many times the largest gold drawn (a rare gold the draw missed is near it)."""
MOST = 0.05
"""Above this mass of training golds paid for copying an example (or this share of replies that copy one) the
finding is an error, else a warning."""
SUPPORT_KEPT = 1000
EXAMPLES = 3

_HASHES = re.compile(r"(?m)^[ \t>*]*#{3,}[ \t]*(\S+)")
_PHRASE = re.compile(r"(?i)\bthe (?:final )?answer is[ \t:]*(\S+)")
_INLINE = re.compile(r"(?i)(?<![\w<])answer\s*:[\s*$`]*(-?\d+(?:\.\d+)?(?:/\d+)?)(?![\w/.]\d|\w)")
"""``Answer: v`` inside a sentence (``end with a line like "Answer: 7".``): the line a copying reply writes."""
_LAST_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:/\d+)?(?![\w])")


class Shown(NamedTuple):
    """One value a prompt shows as an answer."""

    value: Fraction
    line: str
    kind: str
    """``answer`` (a line the verifier reads), ``hashes``, ``phrase`` or ``result`` (``<expression> = v``)."""


def _number(text: str | None) -> Fraction | None:
    if not text:
        return None
    return parse_number(text.strip().strip("*`$").rstrip(".,;").strip("*`$"), lowest_terms=False)


def shown_answers(text: str) -> list[Shown]:
    """Every value ``text`` shows as an answer (module docstring), line by line, and each worked example's final
    line's last number where the block of lines above it writes arithmetic of that value."""
    out: list[Shown] = []
    lines = text.split("\n")
    for raw in lines:
        line = normalised(raw)
        out += [Shown(s.computed, raw.strip()[:200], "result") for s in statements(line)]
        if re.search(r"(?i)\banswer\s*:|\\boxed", raw) and (v := _number(extract_final_answer(raw))) is not None:
            out.append(Shown(v, raw.strip()[:200], "answer"))
        out += [Shown(v, raw.strip()[:200], kind) for pattern, kind in
                ((_HASHES, "hashes"), (_PHRASE, "phrase"), (_INLINE, "answer"))
                for m in pattern.finditer(raw) if (v := _number(m.group(1))) is not None]
    block: list[str] = []
    for raw in lines + [""]:  # a worked example's final line: what a reply that copies the example ends on
        if raw.strip():
            block.append(raw)
            continue
        numbers = _LAST_NUMBER.findall(block[-1]) if len(block) > 1 and "<" not in block[-1] else []
        if numbers and (v := _number(numbers[-1])) is not None and v in results(block[:-1]):
            out.append(Shown(v, block[-1].strip()[:200], "final"))
        block = []
    return out


def results(lines: list[str]) -> set[Fraction]:
    """The values of the arithmetic (with an operator) ``lines`` write: what an example's final number answers."""
    runs = (r.strip() for line in lines for r in re.findall(ARITH + "+", normalised(line)))
    return {v for r in runs if BINARY.search(r) and (v := value_of(r)) is not None}


def gold_values(domain: Any, specs: list[Any]) -> list[Fraction | None]:
    """The golds of :data:`DRAWN` tasks of ``specs`` from the trusted generator (the train split: the support is the
    generator's, and no held-out question is read), each as a number or None."""
    from harness_repo.contract import TaskSpec

    tasks = domain.tasks("train", [s if isinstance(s, TaskSpec) else TaskSpec.model_validate(s) for s in specs],
                         DRAWN, SEED)
    return [parse_number(gold_text(t.ground_truth), lowest_terms=False) for t in tasks]


def _mass(golds: list[Fraction | None], values: set[Fraction]) -> float:
    return sum(g in values for g in golds) / len(golds) if golds else 0.0


def _copies(rows: list[dict], values: set[Fraction]) -> tuple[int, int, int]:
    """(training replies read, those whose final answer is one of ``values``, of those the verified ones)."""
    replies = copied = paid = 0
    for row in rows:
        if row.get("split", "train") != "train" or not isinstance(row.get("response"), str):
            continue
        replies += 1
        if _number(extract_final_answer(row["response"])) in values:
            copied += 1
            paid += (row.get("verified") or 0) >= 0.5
    return replies, copied, paid


def shown_answer_checks(rows: list[dict], train_tasks: list[dict] | None, exam_specs: list[Any] | None,
                        domain: Any) -> tuple[list[dict], list[dict]]:
    """The check on main's rendered prompts against the golds main's mix produces, and ``main:shown_answer`` where
    any value they show as an answer is one (rate: its mass on the training mix).  Nothing where the domain, the
    mix or numeric golds are missing (a domain whose golds are not numbers shows no answer a number can copy)."""
    if domain is None or not train_tasks or not callable(getattr(domain, "tasks", None)):
        return [], []
    n, carrying = read_rows(rows, lambda text: [s._asdict() for s in shown_answers(text)])
    if not n:
        return [], []
    own = [parse_number(gold_text(r.get("ground_truth")), lowest_terms=False) for r in rows[:64]]
    if sum(g is not None for g in own) * 2 <= len(own):
        return [], []  # the round's own golds are not numbers (SWE, code): no draw of the mix
    if not carrying:
        return [{"name": NAME, "passed": True, "detail": f"none of {n} rendered prompts shows a value as an "
                 "answer"}], []
    try:
        train = gold_values(domain, train_tasks)
        exam = gold_values(domain, list(exam_specs or []))
    except Exception as exc:  # noqa: BLE001 - a mix the generator refuses is named by the checks that own it
        return [{"name": NAME, "passed": True, "detail": f"not measured: the task mix could not be drawn: "
                 f"{type(exc).__name__}: {exc}"[:400]}], []
    numeric = [g for g in train + exam if g is not None]
    if len(numeric) * 2 < len(train + exam):
        return [], []
    support = set(numeric)
    bound = HEADROOM * max(abs(g) for g in numeric)
    offending: dict[Fraction, dict] = {}
    rows_with: list[tuple[dict, list[dict]]] = []
    for row, items in carrying:
        hits = [w for w in items if w["value"] in support]
        for w in hits:
            offending.setdefault(w["value"], {"value": shown(w["value"]), "role": w["role"], "line": w["line"],
                                              "kind": w["kind"], "mass": round(_mass(train, {w["value"]}), 4)})
        if hits:
            rows_with.append((row, hits))
    mass = _mass(train, set(offending))
    replies, copied, paid = _copies(rows, set(offending))
    detail = (f"{len(rows_with)} of {n} rendered prompts show as an answer a value the task mix's golds take: "
              + "; ".join(f"{w['value']} ('{w['line'][:50]}', {w['mass']:.3f} of the golds)"
                          for w in list(offending.values())[:4])
              + f"; a policy copying them is paid on {mass:.3f} of the training mix's golds ({DRAWN} drawn)"
              if offending else f"the values {n} rendered prompts show as answers are none of {len(support)} "
                                f"distinct golds of {DRAWN} drawn tasks of main's mix and the exam's")
    check = {"name": NAME, "passed": not offending, "detail": detail[:400]}
    if not offending:
        return [check], []
    copy_share = copied / replies if replies else 0.0
    evidence = {"shown": list(offending.values()), "mass": round(mass, 4), "exam_mass": round(_mass(exam, set(
        offending)), 4), "drawn": len(train), "seed": SEED, "bound": float(bound),
        "support": [shown(g) for g in sorted(support)][:SUPPORT_KEPT], "replies": replies, "copied": copied,
        "copied_paid": paid, "rows": n}
    examples = [example(r) | {"prompt": " | ".join(f"{w['line'][:70]}" for w in hits[:2])}
                for r, hits in rows_with[:EXAMPLES]]
    severity = "error" if mass > MOST or copy_share > MOST else "warning"
    return [check], [{"name": MODE, "source": "main_checks", "severity": severity, "rate": round(mass, 4),
                      "message": (f"main fails the {NAME} check: {detail}; {copied} of {replies} replies end on a "
                                  f"shown value ({paid} paid)")[:400], "examples": examples, "evidence": evidence}]


def support_of(finding: dict) -> tuple[set[Fraction], Fraction] | None:
    """(the golds drawn, the bound a repair aims beyond) from a ``main:shown_answer`` finding's evidence."""
    evidence = finding.get("evidence") if isinstance(finding, dict) else None
    if not isinstance(evidence, dict) or not isinstance(evidence.get("bound"), int | float):
        return None
    values = {v for s in evidence.get("support") or [] if (v := parse_number(str(s), lowest_terms=False)) is not None}
    return values, Fraction(evidence["bound"]).limit_denominator(10 ** 6)


__all__ = ["MODE", "NAME", "Shown", "gold_values", "results", "shown_answer_checks", "shown_answers", "support_of"]
