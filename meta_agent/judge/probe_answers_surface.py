"""The surface of a policy's wrong SWE answer, read from an archived answer and worn by a constructed one.

A reward that pays wrong answers by a mark of their surface (SEARCH/REPLACE edits, a made-up ``index`` hash, a
hunk header whose counts are off, a file the gold change does not touch: issue 45, held-out set c) harms
training where the policy writes that mark.  The probe's wrong answers are the policy's own where the latest
round holds some for the task (``probe_archived_code.real_wrong_patches``); elsewhere a constructed wrong patch
(``probe_answers_swe``) is laid out as an archived wrong answer of any task was, mark for mark
(:func:`read_surface`, :func:`wear`).  With about :data:`FLOOR` chance a wrong answer, the policy's own or a
constructed one, also wears one mark of :data:`MARKS` dealt from the probe's own deck (:func:`dealt`), so a
mark the policy has not written yet is in some probes; on the policy's own patch it is the only change.

What moves is only the layout: the edits are the fresh task's, and the record stays true (a miscounted header
is checked with ``git apply`` over the task's sources; a new notes file changes no test).

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
    miscount: int = 0
    """How far the first hunk header's old-line count is off (0: right)."""
    other: tuple[str, tuple[str, ...]] | None = None
    """A file beyond the gold change's, and the lines the answer adds to it."""


def read_surface(block: str, sources: dict[str, str], gold: str) -> Surface:
    """The surface of ``block`` (an answer's fenced text), written for a task with ``sources`` and ``gold``."""
    from meta_agent.judge.probe_answers_swe import blob

    if "<<<<<<< SEARCH" in block or "<<<<<<<SEARCH" in block:
        return Surface(form="search_replace")
    header = diff_style(block)
    index, path = ("none" if header == "git" else "real"), None
    for line in block.splitlines():
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[-1].strip()
        elif (found := _INDEX.match(line)) and index != "made_up":
            real = blob(sources.get(path or "", "").splitlines(keepends=True)) if path in sources else ""
            index = "real" if real and (real.startswith(found.group(1)) or found.group(1).startswith(real)) \
                else "made_up"
    gold_files = set(re.findall(r"^\+\+\+ b/(\S+)", gold, re.M))
    other = None
    for name, added in _files(block).items():
        if name not in gold_files:
            other = (name, tuple(added[:20]))
            break
    return Surface("diff", header, index, _miscount(block), other)


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


def _miscount(block: str) -> int:
    """How far the first hunk header whose old-line count disagrees with its body is off (0: none does)."""
    lines = block.splitlines()
    for i, line in enumerate(lines):
        found = _HUNK.match(line)
        if not found or found.group(2) is None:
            continue
        old = 0
        for nxt in lines[i + 1:]:
            if nxt.startswith(("@@", "diff ", "--- ", "+++ ")):
                break
            old += nxt[:1] in (" ", "-", "")
        if int(found.group(2)) != old:
            return int(found.group(2)) - old
    return 0


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
        return Surface(form="search_replace")
    base = replace(base, form="diff")
    if mark == "made_up_index":
        return replace(base, header="git", index="made_up")
    if mark == "miscount":
        return replace(base, miscount=rng.choice((-2, -1, 1, 1, 2)))
    return replace(base, other=(rng.choice(_NOTE_PATHS), (rng.choice(("Fixed the bug.", "See the change above.",
                                                                      "Handles the failing case.")),)))


def wear(patch: str, surface: Surface, task, sources: dict[str, str], rng: random.Random) -> tuple[str, dict | None]:
    """``patch`` (a constructed diff over ``sources``, in ``surface.header``'s style) laid out as ``surface``, and
    the grader's record where the layout changes it (a miscount that ``git apply`` refuses); a mark that cannot
    be worn here is left off (a SEARCH text that is not unique, a notes file the repository holds, a miscount
    that still applies)."""
    if surface.form == "search_replace":
        edits = _search_replace(patch, sources)
        if edits is not None:
            return edits, None
        surface = Surface()
    text = _git_headed(patch, rng) if surface.header == "git" and not patch.startswith("diff --git ") else patch
    if surface.header == "git" and surface.index != "real":
        text = "".join(_reindexed(line, surface.index, rng) for line in text.splitlines(keepends=True))
    if surface.other is not None and _new_file_fits(task, surface.other[0]):
        name, added = surface.other
        text += f"diff --git a/{name} b/{name}\nnew file mode 100644\n" if surface.header == "git" else ""
        text += f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1,{len(added)} @@\n" + "".join(f"+{a}\n" for a in added)
    if surface.miscount:
        miscounted = _first_header_off(text, surface.miscount)
        record = _refused(miscounted, sources) if miscounted != text else None
        if record is not None:
            return miscounted, record
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


def _reindexed(line: str, index: str, rng: random.Random) -> str:
    if not line.startswith("index "):
        return line
    if index == "none":
        return ""
    return f"index {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644\n"


def _first_header_off(text: str, by: int) -> str:
    """``text`` with its first hunk header's old-line count off by ``by`` (the body unchanged)."""
    def off(found: re.Match) -> str:
        old = int(found.group(2)) if found.group(2) is not None else 1
        new = f",{found.group(4)}" if found.group(4) is not None else ""
        return f"@@ -{found.group(1)},{max(0, old + by)} +{found.group(3)}{new} @@"
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


def _search_replace(patch: str, sources: dict[str, str]) -> str | None:
    """``patch``'s hunks as SEARCH/REPLACE edits, each SEARCH text found once in its file; None when one is not."""
    out, path, old, new = [], None, None, None

    def close() -> bool:
        if old is None or path is None:
            return True
        search = "".join(old)
        if not search or sources.get(path, "").count(search) != 1:
            return False
        out.append(f"{path}\n<<<<<<< SEARCH\n{search}=======\n{''.join(new)}>>>>>>> REPLACE\n")
        return True
    for line in patch.splitlines() + ["@@ end"]:
        if line.startswith(("@@", "diff ", "--- ", "+++ ")):
            if not close():
                return None
            old = new = None
            if line.startswith("+++ b/"):
                path = line[6:].strip()
            elif line.startswith("@@") and line != "@@ end":
                old, new = [], []
        elif old is not None and line[:1] in (" ", "-", "+", ""):
            if line[:1] != "+":
                old.append(line[1:] + "\n")
            if line[:1] != "-":
                new.append(line[1:] + "\n")
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
