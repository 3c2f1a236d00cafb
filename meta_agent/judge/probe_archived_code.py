"""Code and SWE probe answers from what training produced: archived groups' answers around the fresh task's code.

A program or a patch belongs to its task: moved to another task it is no answer at all.  What can move is
everything around it, and that is what a reward that spares the probe's constructed shapes reads: the policy's
own prose, fences, slips and truncations, and the group's make-up (how many members were right, wrong,
unformatted or cut off).  So about three quarters of a code or SWE probe's groups are archived groups of the
latest round, each member kept as the policy wrote it but for its code block:

- code: a member the verifier accepted gets the fresh task's reference in its block; a member it rejected keeps
  its own program, its first ``def`` line replaced by the fresh task's signature and its parameters renamed to
  the signature's in order (the policy's own wrong code, which runs on the fresh task's tests, graded there);
  a member with no block keeps its prose;
- SWE: a member the verifier accepted gets the fresh task's gold change in its block, one it rejected a policy's
  own rejected patch of the fresh task where the latest round holds one, else a change of code where the gold
  change goes that keeps the bug (``probe_answers_swe``) laid out as the member's own block is: SEARCH/REPLACE or
  a diff, its header, index hashes, miscounts and extra files (``probe_answers_surface``); a member with no block
  keeps its prose; every block keeps the member's fence label.  Records of parsed patches are true by
  construction (``probe_answers.swe_grade``; a header ``git apply`` refuses: its refusal), as for the constructed
  answers: no SWE test runs in the probe.

A member cut off (``truncated``, or a block that never closes) keeps its block cut at the same share of its
lines.  The trusted verifier grades every code answer afresh; nothing archived is carried over.  What stays
constructed: the code inside the block of an accepted member (the dataset's reference, or the gold change).

    groups = archived_answer_groups(latest_round_rows)
    answers = retarget_code(rng.choice(groups), task, rng, group_size=4)      # or None (task unknown)
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from meta_agent.judge.probe_answers import Constructed
from meta_agent.judge.probe_answers_surface import (Surface, dealt, marked, read_surface, task_files, wear,
                                                    worn_wrong_patch)

FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)(\n```|\Z)", re.S)
CODE_DOMAINS = ("code", "swe")


@dataclass(frozen=True)
class ArchivedAnswers:
    """One archived GRPO group's answers in order: (response, truncated, finish_reason, verified) per member."""

    members: tuple[tuple[str, bool, str | None, bool], ...]
    task_id: str | None = None
    """The archived group's task (SWE: its wrong answers' surface is read against that task's files)."""


def archived_answer_groups(rows: list[dict]) -> list[ArchivedAnswers]:
    """The rows' groups whose every member has a text response and a verifier outcome."""
    by_group: dict[tuple, list[dict]] = {}
    for row in rows:
        by_group.setdefault((row.get("run_id"), row.get("round"), row.get("group_id")), []).append(row)
    out = []
    for group in by_group.values():
        if not all(isinstance(r.get("response"), str) and isinstance(r.get("verified"), (int, float)) for r in group):
            continue
        group.sort(key=lambda r: r.get("sample_idx") or 0)
        out.append(ArchivedAnswers(tuple((r["response"], bool(r.get("truncated")), r.get("finish_reason"),
                                          float(r["verified"]) >= 0.5) for r in group), str(group[0].get("task_id"))))
    return out


RealPatch = tuple[str, dict]
"""A policy's rejected SWE patch of the latest round (its diff block) and the grader's record of it."""
MAX_SURFACES = 64
"""Rejected answers of the latest round whose surface is read at most (``archived_surfaces``)."""


def real_wrong_patches(rows: list[dict]) -> dict[str, list[RealPatch]]:
    """Per SWE task, the rows' rejected answers whose diff block the grader judged, with the grader's record: a
    policy's wrong patches as they are (their size, hunks, spelling, what they break), for the probe's same task."""
    out: dict[str, list[RealPatch]] = {}
    for row, found, info in _rejected_blocks(rows):
        out.setdefault(str(row.get("task_id")), []).append((found.group(2), info))
    return out


def _rejected_blocks(rows: list[dict]):
    """(row, its fenced block match, its grader's record) per rejected, whole, parsed answer of ``rows``."""
    for row in rows:
        info = row.get("verifier_info")
        try:
            info = json.loads(info) if isinstance(info, str) else info
        except ValueError:
            continue
        found = FENCE.search(row["response"]) if isinstance(row.get("response"), str) else None
        if not isinstance(info, dict) or not isinstance(info.get("execution"), dict) or found is None \
                or not isinstance(row.get("verified"), (int, float)) or row["verified"] >= 0.5 \
                or info.get("parse_status") != "ok" or not found.group(3).strip() or row.get("truncated"):
            continue
        yield row, found, info


def archived_surfaces(rows: list[dict]) -> list[Surface]:
    """The surfaces of the rows' rejected, parsed SWE answers (any task; at most ``MAX_SURFACES``): the layouts
    a constructed wrong answer wears where the probe's task has no wrong answer of the policy's own."""
    out = []
    for row, found, _ in _rejected_blocks(rows):
        files = task_files(str(row.get("task_id")))
        if files is not None:
            out.append(read_surface(found.group(2), *files))
        if len(out) >= MAX_SURFACES:
            break
    return out


def retarget_code(group: ArchivedAnswers, task, rng: random.Random, group_size: int,
                  domain_name: str, real: list[RealPatch] = ()) -> list[Constructed] | None:
    """``group``'s answers around code for ``task`` (``group_size`` of them: the group's own, or drawn from it
    when its size differs); None when the task's reference or gold change cannot be read.  SWE: ``real`` holds
    the latest round's rejected patches of ``task`` (``real_wrong_patches``); a rejected member whose block is
    whole carries one of them, with its record, or a constructed one laid out as its own block is
    (``swe_wrong_member``)."""
    made = _code_maker(task, rng) if domain_name == "code" else _swe_maker(task, rng)
    if made is None:
        return None
    members = list(group.members)
    if len(members) != group_size:
        members = [rng.choice(members) for _ in range(group_size)]
    out = []
    for response, truncated, finish, verified in members:
        found = FENCE.search(response)
        if found is None:  # no program or patch: the policy's prose as written (the verifier grades it)
            out.append(_graded(task, response, truncated, finish, domain_name))
            continue
        cut = truncated or not found.group(3).strip()
        if domain_name == "swe" and not verified and not cut:  # the policy's own, or one laid out as this one is
            files = task_files(str(group.task_id)) if group.task_id else None
            own = read_surface(found.group(2), *files) if files else None
            out.append(swe_wrong_member(task, (response[:found.start()], found.group(1), found.group(3)
                                               + response[found.end():]), truncated, finish, real,
                                        [own] if own else [], rng))
            continue
        body = made(verified, found.group(2))
        lines = body.splitlines()
        if cut and domain_name == "swe":  # before the change's first added line, as the constructed cut: no fix
            lines = lines[:next((i for i, ln in enumerate(lines) if ln.startswith("+") and not ln.startswith("+++")),
                                len(lines))]
        elif cut:  # at about the share of the archived block that was written
            share = max(len(found.group(2).splitlines()), 1)
            lines = lines[:max(1, min(len(lines) - 1, len(lines) * share // (share + 1)))]
        label = found.group(1)  # the policy's own fence label (a bare fence, ``diff``, ``python``...)
        text = response[:found.start()] + f"```{label}\n" + "\n".join(lines) \
            + (found.group(3) if not cut else "") + response[found.end():]
        out.append(_graded(task, text, truncated, finish, domain_name, verified and not cut))
    return out


def swe_wrong_member(task, around: tuple[str, str, str], truncated: bool, finish: str | None,
                     real: list[RealPatch], surfaces: list[Surface], rng: random.Random) -> Constructed:
    """A rejected member's answer to ``task``, ``around`` = (text before the block, fence label, text after it):
    a policy's own wrong patch of ``task`` (``real``) where there is one, else a constructed one laid out as one
    of ``surfaces``; either wearing a mark dealt about ``FLOOR`` of the time (``probe_answers_surface``)."""
    before, label, after = around
    files = task_files(str(task.ground_truth["task_id"]))
    mark = dealt(rng)
    if real and files is not None:
        block, info = rng.choice(list(real))  # a policy's own wrong patch of this task, graded in training
        if mark is not None:  # the mark its only change (its edits, size, spelling kept)
            diff = block if "<<<<<<<" not in block else parsed_answer(block, files[0]).patch
            worn, record = wear(diff, marked(read_surface(block, *files), mark, rng), task, files[0], rng)
            return with_record(f"{before}```{label}\n{worn.rstrip()}{after}", record or info, files[0],
                                truncated, finish)
        return Constructed(f"{before}```{label}\n{block.rstrip()}{after}", truncated, (0.0, info), finish_reason=finish)
    surface = rng.choice(surfaces) if surfaces else None
    surface = marked(surface or Surface(), mark, rng) if mark is not None else surface
    block, record = worn_wrong_patch(task, surface, rng)
    text = f"{before}```{label}\n{block.rstrip()}{after}"
    if record is None:
        return _graded(task, text, truncated, finish, "swe")
    return with_record(text, record, files[0] if files else {}, truncated, finish)


def parsed_answer(text: str, sources: dict[str, str]):
    """``swe_env.patch_format.parse_response`` of ``text`` (an answer, or a bare block: fenced first)."""
    from swe_env.patch_format import parse_response

    return parse_response(text if "```" in text else f"```\n{text}\n```", sources)


def with_record(text: str, record: dict, sources: dict[str, str], truncated: bool, finish: str | None) -> Constructed:
    """A rejected answer with ``record`` (the grader's), its parse and feedback as training writes them."""
    from swe_env.feedback import execution_feedback

    info = {k: v for k, v in record.items() if k != "execution"} | parsed_answer(text, sources).to_info()
    info["execution"] = execution_feedback(info)
    return Constructed(text, truncated, (0.0, info), finish_reason=finish)


def _graded(task, response: str, truncated: bool, finish: str | None, domain_name: str,
            resolved: bool = False) -> Constructed:
    """The answer with its record where one is true by construction (a parsed SWE patch: ``resolved`` when it
    carries the whole gold change); else the verifier grades it."""
    if domain_name != "swe":
        return Constructed(response, truncated, None, finish_reason=finish)
    from meta_agent.judge.probe_answers import swe_grade
    from swe_env.checked import load_task
    from swe_env.feedback import execution_feedback
    from swe_env.patch_format import parse_response
    from swe_env.tasks import buggy_sources

    parsed = parse_response(response, buggy_sources(load_task(str(task.ground_truth["task_id"]))))
    if parsed.status != "ok":
        return Constructed(response, truncated, None, finish_reason=finish)
    info = swe_grade(task, parsed.patch, resolved) | parsed.to_info()
    info["execution"] = execution_feedback(info)
    return Constructed(response, truncated, (1.0 if resolved else 0.0, info), finish_reason=finish)


def _code_maker(task, rng: random.Random):
    from domains.code_tasks import tasks_by_id
    from meta_agent.judge.probe_answers import signature_params
    from meta_agent.judge.probe_answers_forms import renamed

    spec = tasks_by_id().get(str((task.ground_truth or {}).get("task_id")))
    if spec is None:
        return None

    def make(verified: bool, archived: str) -> str:
        if verified:
            return spec["reference"].rstrip()
        lines = archived.rstrip().splitlines()
        at = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), None)
        if at is None:  # no function: the policy's wrong text, under the fresh signature
            return spec["signature"] + "\n" + "\n".join("    " + line for line in lines or ["pass"])
        indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
        # the policy's parameters renamed to the fresh signature's, in order (extra ones reuse them), so the
        # program runs on the fresh task as a policy's wrong program does instead of stopping at a NameError
        old, fresh = signature_params(_def_line(lines, at)), signature_params(spec["signature"])
        mapping = {name: fresh[i % len(fresh)] for i, name in enumerate(old) if name not in fresh} if fresh else {}
        body = renamed("\n".join(lines[at + 1:]), mapping)
        return "\n".join(lines[:at] + [indent + spec["signature"]] + ([body] if body else []))
    return make


def _def_line(lines: list[str], at: int) -> str:
    """The ``def`` line at ``at`` (a one-line header; a header over several lines yields no parameters)."""
    return lines[at].strip()


def _swe_maker(task, rng: random.Random):
    from meta_agent.judge.probe_answers import swe_wrong_patch
    from meta_agent.judge.probe_answers_swe import diff_style
    from swe_env.checked import load_task
    from swe_env.tasks import buggy_sources

    gold = str((task.ground_truth or {}).get("gold_patch") or "")
    if not gold.strip():
        return None
    sources = buggy_sources(load_task(str(task.ground_truth["task_id"])))

    def make(verified: bool, archived: str) -> str:
        # a wrong member's change written in the style of its own diff (git's header, or a bare one)
        return gold.rstrip() if verified else swe_wrong_patch(gold, sources, rng, diff_style(archived)).rstrip()
    return make
