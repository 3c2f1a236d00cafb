"""The surface of a policy's wrong SWE answer, read from an archived answer and worn by a constructed one.

A reward that pays wrong answers by a mark of their surface (SEARCH/REPLACE edits, a made-up ``index`` hash, a
hunk header whose counts are off, a file the gold change does not touch: issue 45, held-out set c) harms
training where the policy writes that mark.  The probe's wrong answers are the policy's own where the latest
round holds some for the task (``probe_archived_code.real_wrong_patches``); elsewhere a constructed wrong patch
(``probe_answers_swe``) is laid out as an archived wrong answer of any task was, mark for mark
(:func:`read_surface`, :func:`wear`): its form, header, index line as written, path prefixes, miscounts of either
side, extra file and SEARCH length (held-out set d won on the last four, when only the listed marks moved).
With about :data:`FLOOR` chance a wrong answer, the policy's own or a constructed one, also wears one mark of
:data:`MARKS` dealt from the probe's own deck (:func:`dealt`), so a mark the policy has not written yet is in some
probes; on the policy's own patch it is the only change.

What moves is only the layout: the edits are the fresh task's, and the record stays true (a miscounted header or
bare paths are checked with ``git apply`` over the task's sources, and carry its refusal; a new notes file
changes no test).

    surface = read_surface(block, sources_of_its_task, gold_of_its_task)
    block, record = wear(patch, surface, task, sources, rng)   # record None: the patch's constructed grade holds
    mark = dealt(rng)                                          # "miscount", or None (most answers)
"""

from __future__ import annotations

import functools
import os
import random
import re
import subprocess
import tempfile
import weakref
from dataclasses import dataclass, replace
from pathlib import Path

from meta_agent.judge.probe_answers_swe import diff_style

MARKS = ("search_replace", "made_up_index", "miscount", "other_file")
FLOOR = 0.3
"""The chance a constructed wrong answer wears a mark dealt from the probe's deck rather than an archived
answer's surface (a mark the policy may come to write)."""
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_HUNKS = re.compile(_HUNK.pattern, re.M)
_INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)")
_DECKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NOTE_PATHS = ("NOTES.md", "notes.txt", "CHANGES.txt", "fix.md")


@dataclass(frozen=True)
class Surface:
    """How one wrong answer is laid out (its edits aside)."""

    form: str = "diff"
    """``diff`` or ``search_replace``."""
    header: str = "bare"
    """``git`` (``diff --git`` lines) or ``bare``."""
    index: str = "real"
    """``real``, ``made_up`` (hashes no file has) or ``none`` (git header without an index line)."""
    miscount: tuple[int, int] = (0, 0)
    """How far the first miscounted hunk header's old-line and new-line counts are off ((0, 0): right)."""
    other: tuple[str, tuple[str, ...]] | None = None
    """A file beyond the gold change's, and the lines the answer adds to it."""
    index_line: str | None = None
    """A made-up index line as the answer wrote it (its hashes, mode or none), copied as it is."""
    prefixed: bool = True
    """Whether file headers name ``a/`` and ``b/`` paths (without, ``git apply -p1`` refuses the patch)."""
    search_context: int = 3
    """SEARCH/REPLACE: lines of context around the changed ones (0: the changed lines alone)."""


def read_surface(block: str, sources: dict[str, str], gold: str) -> Surface:
    """The surface of ``block`` (an answer's fenced text), written for a task with ``sources`` and ``gold``."""
    from meta_agent.judge.probe_answers_swe import blob

    if "<<<<<<< SEARCH" in block or "<<<<<<<SEARCH" in block:
        searched = re.findall(r"<{7} ?SEARCH[ \t]*\n(.*?)^={7}", block, re.S | re.M)
        short = bool(searched) and min(len(found.splitlines()) for found in searched) <= 2
        return Surface(form="search_replace", search_context=0 if short else 3)
    header = diff_style(block)
    index, path, index_line = ("none" if header == "git" else "real"), None, None
    for line in block.splitlines():
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[-1].strip()
        elif (found := _INDEX.match(line)) and index != "made_up":
            real = blob(sources.get(path or "", "").splitlines(keepends=True)) if path in sources else ""
            index = "real" if real and (real.startswith(found.group(1)) or found.group(1).startswith(real)) \
                else "made_up"
            index_line = line if index == "made_up" else None
    gold_files = set(re.findall(r"^\+\+\+ b/(\S+)", gold, re.M))
    other = None
    for name, added in _files(block).items():
        if name not in gold_files:
            other = (name, tuple(added[:20]))
            break
    heads = [ln for ln in block.splitlines() if ln.startswith(("--- ", "+++ ")) and "/dev/null" not in ln]
    prefixed = not heads or any(ln.startswith(("--- a/", "+++ b/")) for ln in heads)
    return Surface("diff", header, index, _miscount(block), other, index_line, prefixed)


def _files(block: str) -> dict[str, list[str]]:
    """Per file a diff names after ``+++ b/``, the lines it adds."""
    out: dict[str, list[str]] = {}
    name = None
    for line in block.splitlines():
        if line.startswith("+++ "):
            name = line[6:].strip() if line.startswith("+++ b/") else None
            if name:
                out.setdefault(name, [])
        elif name and line.startswith("+"):
            out[name].append(line[1:])
    return out


def _miscount(block: str) -> tuple[int, int]:
    """How far the first hunk header whose counts disagree with its body is off, old side and new ((0, 0): none)."""
    lines = block.splitlines()
    for i, line in enumerate(lines):
        found = _HUNK.match(line)
        if not found:
            continue
        old = new = 0
        for nxt in lines[i + 1:]:
            if nxt.startswith(("@@", "diff ", "--- ", "+++ ")):
                break
            old += nxt[:1] in (" ", "-", "")
            new += nxt[:1] in (" ", "+", "")
        said_old = int(found.group(2)) if found.group(2) is not None else 1
        said_new = int(found.group(4)) if found.group(4) is not None else 1
        if (said_old, said_new) != (old, new):
            return said_old - old, said_new - new
    return 0, 0


def dealt(rng: random.Random) -> str | None:
    """A mark (:data:`MARKS`) for a wrong answer about ``FLOOR`` of the time, each once per probe before repeats
    (the probe's deck, per its rng), else None."""
    if rng.random() >= FLOOR:
        return None
    deck = _DECKS.setdefault(rng, [])
    if not deck:
        deck += rng.sample(MARKS, len(MARKS))
    return deck.pop()


def marked(base: Surface, mark: str, rng: random.Random) -> Surface:
    """``base`` with ``mark`` (:data:`MARKS`) on it."""
    if mark == "search_replace":
        return Surface(form="search_replace", search_context=rng.choice((0, 3)))
    base = replace(base, form="diff")
    if mark == "made_up_index":
        return replace(base, header="git", index="made_up", index_line=None)
    if mark == "miscount":
        return replace(base, miscount=rng.choice(((-1, 0), (1, 0), (2, 0), (0, 1), (0, -1), (1, 1))))
    return replace(base, other=(rng.choice(_NOTE_PATHS), (rng.choice(("Fixed the bug.", "See the change above.",
                                                                      "Handles the failing case.")),)))


def wear(patch: str, surface: Surface, task, sources: dict[str, str], rng: random.Random) -> tuple[str, dict | None]:
    """``patch`` (a constructed diff over ``sources``, in ``surface.header``'s style) laid out as ``surface``, and
    the grader's record where the layout changes it (a miscount that ``git apply`` refuses); a mark that cannot
    be worn here is left off (a SEARCH text that is not unique, a notes file the repository holds, a miscount
    that still applies)."""
    if surface.form == "search_replace":
        edits = (_search_replace(patch, sources, 0) if surface.search_context == 0 else None) \
            or _search_replace(patch, sources)
        if edits is not None:
            return edits, None
        surface = Surface()
    text = _git_headed(patch, rng) if surface.header == "git" and not patch.startswith("diff --git ") else patch
    if surface.header == "git" and surface.index != "real":
        text = "".join(_reindexed(line, surface.index, rng, surface.index_line)
                       for line in text.splitlines(keepends=True))
    if surface.other is not None and _new_file_fits(task, surface.other[0]):
        name, added = surface.other
        text += f"diff --git a/{name} b/{name}\nnew file mode 100644\n" if surface.header == "git" else ""
        text += f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1,{len(added)} @@\n" + "".join(f"+{a}\n" for a in added)
    laid = _first_header_off(text, surface.miscount) if surface.miscount != (0, 0) else text
    if not surface.prefixed:  # paths as the answer named them: bare, which ``git apply -p1`` cannot strip
        laid = re.sub(r"^(---|\+\+\+) [ab]/", r"\1 ", laid, flags=re.M)
    if laid != text:
        record = _refused(laid, sources)
        if record is not None:
            return laid, record
    return text, None


def _git_headed(patch: str, rng: random.Random) -> str:
    """A bare diff with ``git diff``'s lines before each file (its index hashes made up: the caller keeps them
    only where a made-up index is the mark)."""
    out = []
    lines = patch.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("--- a/") and i + 1 < len(lines) and lines[i + 1].startswith("+++ b/"):
            name = lines[i + 1][6:].strip()
            out += [f"diff --git a/{name} b/{name}\n", _reindexed("index ", "made_up", rng)]
        out.append(line)
    return "".join(out)


def _reindexed(line: str, index: str, rng: random.Random, verbatim: str | None = None) -> str:
    if not line.startswith("index "):
        return line
    if index == "none":
        return ""
    if verbatim:
        return verbatim.rstrip("\n") + "\n"
    return f"index {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644\n"


def _first_header_off(text: str, by: tuple[int, int]) -> str:
    """``text`` with its first hunk header's counts off by ``by`` (old side, new side; the body unchanged)."""
    def off(found: re.Match) -> str:
        old = int(found.group(2)) if found.group(2) is not None else 1
        new = int(found.group(4)) if found.group(4) is not None else 1
        return f"@@ -{found.group(1)},{max(0, old + by[0])} +{found.group(3)},{max(0, new + by[1])} @@"
    return _HUNKS.sub(off, text, count=1)


def _refused(patch: str, sources: dict[str, str]) -> dict | None:
    """The grader's record of ``patch`` when ``git apply`` refuses it over ``sources`` (``patch_failed``, with
    git's own words, as ``swe_env.grade`` writes it); None when it applies."""
    from swe_env.grade import GradeResult

    with tempfile.TemporaryDirectory(prefix="probe-apply-") as tmp:
        repo = Path(tmp) / "repo"
        for rel, text in sources.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        patch_file = Path(tmp) / "submitted.patch"
        patch_file.write_text(patch if patch.endswith("\n") else patch + "\n")
        proc = subprocess.run(["git", "apply", "--check", "--whitespace=nowarn", "-p1", str(patch_file)], cwd=repo,
                              capture_output=True, text=True, env={**os.environ, "GIT_CEILING_DIRECTORIES": tmp})
    if proc.returncode == 0:
        return None
    return GradeResult("patch_failed", False, detail=f"git apply failed: {proc.stderr.strip()[-800:]}").to_info()


def _new_file_fits(task, name: str) -> bool:
    """Whether a new file ``name`` changes no graded outcome: no such file yet, not code, no test or config."""
    from swe_env.checked import load_task
    from swe_env.tasks import agent_repo

    if name.endswith(".py") or "test" in name.lower() or Path(name).name in ("setup.cfg", "pyproject.toml", "tox.ini",
                                                                               "pytest.ini", "conftest.py"):
        return False
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)*", name) or ".." in name.split("/") or name.startswith(".git"):
        return False
    return not (agent_repo(load_task(str(task.ground_truth["task_id"]))) / name).exists()


def _search_replace(patch: str, sources: dict[str, str], context: int = 3) -> str | None:
    """``patch``'s hunks as SEARCH/REPLACE edits, each SEARCH text found once in its file; None when one is not.
    ``context`` 0: one edit per run of changed lines, the changed lines alone (a line before where a run only
    adds); else one edit per hunk, its context and all."""
    hunks: list[tuple[str, list[str]]] = []
    path = None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[6:].strip() if line.startswith("+++ b/") else None
        elif line.startswith(("diff ", "--- ", "index ")):
            continue
        elif line.startswith("@@") and path is not None:
            hunks.append((path, []))
        elif hunks and line[:1] in (" ", "-", "+", ""):
            hunks[-1][1].append(line)
    pieces: list[tuple[str, list[str]]] = []
    for name, body in hunks:
        if context:
            pieces.append((name, body))
            continue
        run: list[str] = []
        for i, line in enumerate(body + [" "]):
            if line[:1] in "+-" and line:
                run.append(line)
                continue
            if run:
                if not any(r.startswith("-") for r in run):  # an insertion: anchored on the line before it
                    before = body[i - len(run) - 1] if i - len(run) > 0 else None
                    if before is None:
                        return None
                    run.insert(0, before)
                pieces.append((name, run))
                run = []
    out = []
    for name, body in pieces:
        search = "".join(b[1:] + "\n" for b in body if not b.startswith("+"))
        replace_with = "".join(b[1:] + "\n" for b in body if not b.startswith("-"))
        if not search.strip() or sources.get(name, "").count(search) != 1:
            return None
        out.append(f"{name}\n<<<<<<< SEARCH\n{search}=======\n{replace_with}>>>>>>> REPLACE\n")
    return "".join(out) or None


def task_files(task_id: str) -> tuple[dict[str, str], str] | None:
    """The buggy sources and the gold change of the SWE task ``task_id`` (None: no such task here)."""
    return _task_files(str(task_id))


@functools.lru_cache(maxsize=64)
def _task_files(task_id: str) -> tuple[dict[str, str], str] | None:
    from swe_env.checked import load_task
    from swe_env.tasks import buggy_sources, gold_patch

    try:
        task = load_task(task_id)
        return buggy_sources(task), gold_patch(task)
    except Exception:  # noqa: BLE001 (a task of another checkout or a removed one: its surface is not read)
        return None


def worn_wrong_patch(task, surface: Surface | None, rng: random.Random) -> tuple[str, dict | None]:
    """A constructed wrong patch of ``task`` (``probe_answers.swe_wrong_patch``) laid out as ``surface`` (as drawn
    when None), and the grader's record where the layout changes it (:func:`wear`)."""
    from meta_agent.judge.probe_answers import swe_wrong_patch

    files = task_files(str(task.ground_truth["task_id"]))
    assert files is not None, task.ground_truth["task_id"]
    sources, gold = files
    gold = str(task.ground_truth.get("gold_patch") or gold)
    patch = swe_wrong_patch(gold, sources, rng, surface.header if surface else None)
    return wear(patch, surface, task, sources, rng) if surface else (patch, None)
