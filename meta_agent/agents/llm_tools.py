"""The LLM agent's tools over one intervention worktree (OpenAI function-calling schemas).

Every tool answers with text the model reads.  A refused or failed call is an
answer too (``Error: ...`` or ``Format error: ...``), never an exception that ends
the round, so the model can correct itself.  The trust rules live here:

- paths resolve inside the worktree; ``..``, absolute paths, symlinks leading out
  and ``.git`` are refused;
- writes go only to files of the harness contract (``contract.EDITABLE_GLOBS``);
- trajectories are shown with their verifier outcome but never from the held-out split;
- the backtest preview never merges or tags (``apply=False``).

    ws = Workspace(repo, wt, round=3, digest=digest, archive=Archive(run / "archive"), preview=preview_fn)
    ws.call("read_file", '{"path": "reward.py"}')      # -> file text
    ws.call("write_file", '{"path": "../x", "content": ""}')   # -> "Error: ../x resolves outside ..."
    ws.submission                                      # set once submit() validated
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import ValidationError

from harness_repo.contract import EDITABLE_GLOBS, HarnessConfig
from harness_repo.gitcmd import git_try
from harness_repo.repo import HarnessRepo, Worktree
from meta_agent.digest import HIGH, NO_FINAL_ANSWER_REASONS, TREND_FIELDS, excerpt
from meta_agent.gate import GATE_METRICS, parse_effect
from meta_agent.judge.findings import parse_finding_effect
from rl_backend.archive import Archive, ArchiveError

MAX_READ_CHARS = 30_000
MAX_WRITE_CHARS = 200_000
MAX_SEARCH_HITS = 60
MAX_TRAJECTORIES = 20
EXCERPT_HEAD, EXCERPT_TAIL = 500, 500
KNOWN_METRICS = tuple(dict.fromkeys((*GATE_METRICS, *TREND_FIELDS)))


def _fn(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


_STR = {"type": "string"}
TOOLS: list[dict] = [
    _fn("list_files", "List the harness files in your worktree; editable ones are marked.", {}, []),
    _fn("read_file", "Read one file of the worktree.", {"path": _STR | {"description": "relative path"}},
        ["path"]),
    _fn("search", "Regular-expression search over the worktree's files; returns path:line: text.",
        {"pattern": _STR}, ["pattern"]),
    _fn("write_file", "Create or overwrite a harness file (only files of the harness contract).",
        {"path": _STR, "content": _STR}, ["path", "content"]),
    _fn("replace_text", "Replace the single exact occurrence of `old` with `new` in a harness file.",
        {"path": _STR, "old": _STR, "new": _STR}, ["path", "old", "new"]),
    _fn("query_trajectories",
        "Show archived trajectories of this round with reward and verifier outcome. kind=disagreement: reward "
        "and verifier disagree; kind=failure: examples of a digest failure mode (give failure_mode); "
        "kind=random: a random sample.",
        {"kind": {"type": "string", "enum": ["disagreement", "failure", "random"]},
         "failure_mode": _STR, "limit": {"type": "integer", "minimum": 1, "maximum": MAX_TRAJECTORIES}},
        ["kind"]),
    _fn("backtest_preview", "Commit your current changes as work in progress and replay them against main on "
        "a small archive sample in the sandbox; returns the gate's figures. Never merges.", {}, []),
    _fn("submit", "Finish: commit your change as an intervention with its hypothesis and predicted effects.",
        {"hypothesis": _STR | {"description": "what is wrong and why this change fixes it"},
         "predicted_effects": {"type": "array", "items": _STR, "minItems": 1,
                               "description": "each '<metric> <increase|decrease|unchanged>[: why]'"},
         "summary": _STR | {"description": "one-line commit subject"},
         "skill": _STR | {"description": "name of the skill applied, if any"},
         "trigger": _STR | {"description": "digest condition under which this change helps, e.g. "
                            "'miss_rate > 0.2'"}},
        ["hypothesis", "predicted_effects", "summary"]),
]
TOOL_NAMES = tuple(t["function"]["name"] for t in TOOLS)
_TYPES = {"string": str, "integer": int, "array": list}


class ToolError(Exception):
    """A refused or failed tool call; the message is shown to the model."""


class FormatError(ToolError):
    """A call the model must re-send in the right form (bad JSON, unknown tool, wrong arguments)."""


@dataclass
class Submission:
    """What the model submitted, validated."""

    hypothesis: str
    predicted_effects: list[str]
    summary: str
    files_changed: list[str]
    skill: str | None = None
    trigger: str | None = None


def is_editable(rel: str) -> bool:
    """True when ``rel`` (POSIX, relative) matches a glob of the harness contract, component by component."""
    parts = rel.split("/")
    return any(len(parts) == len(p.split("/")) and all(map(fnmatchcase, parts, p.split("/")))
               for p in EDITABLE_GLOBS)


def git_in(path: Path, *args: str) -> str:
    """Run git in ``path`` with hooks disabled (the worktree is untrusted); its stdout."""
    status, out, err = git_try(path, *args)
    if status != 0:
        raise ToolError(f"git {' '.join(args)} failed: {err.strip() or out.strip()}")
    return out


def check_effect(text: str) -> str | None:
    """Why a predicted effect is malformed, or None when it is fine."""
    if parse_finding_effect(text):  # what a diagnostics change adds: judged by the findings ratchet
        return None
    parsed = parse_effect(text)  # the gate's own parser: what it cannot read, it cannot judge
    if parsed is None:
        return (f"{text!r} is not '<metric> <increase|decrease|unchanged>[: reason]' "
                "(e.g. 'miss_rate decrease: boxed answers are read')")
    if parsed[0] not in KNOWN_METRICS:
        return f"{parsed[0]!r} is not a metric; use one of {', '.join(KNOWN_METRICS)}"
    return None


class Workspace:
    """The tools of one candidate conversation, bound to its worktree."""

    def __init__(self, repo: HarnessRepo, wt: Worktree, *, round: int, digest: dict,
                 archive: Archive | None, skills: list[str] | None = None,
                 preview: Callable[[Worktree], str] | None = None) -> None:
        self.repo, self.wt, self.round, self.digest = repo, wt, round, digest
        self.root = Path(wt.path).resolve()
        self.archive, self.skills, self._preview = archive, list(skills or []), preview
        self._rows: list[dict] | None = None
        self.submission: Submission | None = None

    # -- dispatch ---------------------------------------------------------------------

    def call(self, name: str, raw_arguments: str | None) -> str:
        """Run tool ``name`` on JSON ``raw_arguments``; the answer for the model (errors included)."""
        try:
            args = self._parse(name, raw_arguments)
            return getattr(self, f"tool_{name}")(**args)
        except FormatError as exc:
            return f"Format error: {exc}"
        except ToolError as exc:
            return f"Error: {exc}"
        except OSError as exc:  # e.g. a name too long for the file system: the model's to fix
            return f"Error: {exc.strerror or exc}"

    def _parse(self, name: str, raw: str | None) -> dict[str, Any]:
        if name not in TOOL_NAMES:
            raise FormatError(f"there is no tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
        try:
            args = json.loads(raw) if raw and raw.strip() else {}
        except ValueError as exc:
            raise FormatError(f"the arguments of {name} are not valid JSON ({exc}); send one JSON object") from None
        if not isinstance(args, dict):
            raise FormatError(f"the arguments of {name} must be a JSON object, got {type(args).__name__}")
        schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)
        missing = [k for k in schema["required"] if k not in args]
        unknown = [k for k in args if k not in schema["properties"]]
        if missing or unknown:
            raise FormatError(f"{name} needs {schema['required'] or 'no arguments'}; missing {missing}, "
                              f"unknown {unknown}")
        for key, value in args.items():
            kind = schema["properties"][key]["type"]
            if not isinstance(value, _TYPES[kind]) or isinstance(value, bool) or (
                    kind == "array" and not all(isinstance(v, str) for v in value)):
                raise FormatError(f"argument {key} of {name} must be a {kind}"
                                  f"{' of strings' if kind == 'array' else ''}, got {value!r:.80}")
        return args

    # -- paths ------------------------------------------------------------------------

    def resolve(self, path: str, *, write: bool) -> tuple[Path, str]:
        """(absolute path, repo-relative POSIX path) inside the worktree, or ToolError saying why not."""
        if not path.strip() or "\0" in path:
            raise ToolError(f"{path!r} is not a usable path; give one relative to the harness root, e.g. reward.py")
        if PurePosixPath(path).is_absolute():
            raise ToolError(f"{path} is absolute: only paths relative to the harness root are allowed")
        full = (self.root / path).resolve()
        if not full.is_relative_to(self.root):
            raise ToolError(f"{path} resolves outside your worktree; refused")
        rel = full.relative_to(self.root).as_posix()
        if rel == "." or ".git" in rel.split("/"):
            raise ToolError(f"{path} is not a harness file; refused")
        if write and not is_editable(rel):
            raise ToolError(f"{rel} is outside the harness contract; you may only write "
                            f"{', '.join(EDITABLE_GLOBS)}")
        return full, rel

    def _files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*") if p.is_file() and not p.is_symlink()
                      and ".git" not in p.relative_to(self.root).parts and "__pycache__" not in p.parts)

    # -- tools ------------------------------------------------------------------------

    def tool_list_files(self) -> str:
        lines = []
        for p in self._files():
            rel = p.relative_to(self.root).as_posix()
            lines.append(f"{rel}  ({p.stat().st_size} bytes{', editable' if is_editable(rel) else ''})")
        return "\n".join(lines) + f"\n\nNew files may be created at: {', '.join(EDITABLE_GLOBS)}"

    def tool_read_file(self, path: str) -> str:
        full, rel = self.resolve(path, write=False)
        if not full.is_file():
            raise ToolError(f"{rel} does not exist; list_files shows what does")
        text = full.read_text(errors="replace")
        if len(text) > MAX_READ_CHARS:
            return text[:MAX_READ_CHARS] + f"\n[... truncated: {len(text) - MAX_READ_CHARS} more characters]"
        return text

    def tool_search(self, pattern: str) -> str:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"bad regular expression {pattern!r}: {exc}") from None
        hits = []
        for p in self._files():
            for number, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{p.relative_to(self.root).as_posix()}:{number}: {line.strip()[:200]}")
        more = f"\n[... {len(hits) - MAX_SEARCH_HITS} more matches]" if len(hits) > MAX_SEARCH_HITS else ""
        return "\n".join(hits[:MAX_SEARCH_HITS]) + more if hits else f"no match for {pattern!r}"

    def tool_write_file(self, path: str, content: str) -> str:
        full, rel = self.resolve(path, write=True)
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"content has {len(content)} characters; the limit is {MAX_WRITE_CHARS}")
        if full.is_symlink() or (full.exists() and not full.is_file()):
            raise ToolError(f"{rel} is not a regular file; refused")
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(content)
        return f"wrote {len(content)} characters to {rel}"

    def tool_replace_text(self, path: str, old: str, new: str) -> str:
        full, rel = self.resolve(path, write=True)
        if not full.is_file():
            raise ToolError(f"{rel} does not exist; create it with write_file")
        text = full.read_text()
        count = text.count(old) if old else 0
        if count != 1:
            why = "is empty" if not old else f"occurs {count} times" if count else "does not occur"
            raise ToolError(f"`old` {why} in {rel}; it must match exactly once (copy it from read_file, "
                            "with enough context to be unique)")
        full.write_text(text.replace(old, new, 1))
        return f"replaced 1 occurrence in {rel}"

    def tool_query_trajectories(self, kind: str, failure_mode: str | None = None, limit: int = 5) -> str:
        rows = self._archive_rows()
        picked = select_trajectories(rows, kind, failure_mode, self.digest, random.Random(self.round))
        shown = [_trajectory_card(r) for r in picked[:max(1, min(limit, MAX_TRAJECTORIES))]]
        header = f"{len(picked)} trajectories match; showing {len(shown)}"
        return header + "\n" + json.dumps(shown, indent=1, default=str)

    def _archive_rows(self) -> list[dict]:
        if self._rows is None:
            if self.archive is None or not Path(self.archive.root).is_dir():
                where = self.archive.root if self.archive is not None else "this run"
                raise ToolError(f"no trajectory archive at {where}; nothing to query")
            try:
                rows = self.archive.rows(round=self.round)
                if not rows:  # e.g. a digest built from imported dumps of earlier rounds
                    rows = self.archive.rows()
            except ArchiveError as exc:
                raise ToolError(f"cannot read the archive: {exc}") from None
            # the held-out split stays unseen by anything that shapes the harness
            self._rows = [r for r in rows if r.get("split") != "heldout"]
        return self._rows

    def tool_backtest_preview(self) -> str:
        if self._preview is None:
            raise ToolError("backtest preview is not available in this run")
        if not self.changed_files():
            raise ToolError("nothing changed yet: edit a harness file before previewing")
        if git_in(self.root, "status", "--porcelain"):
            self.repo.commit(self.wt, "WIP: backtest preview", {})
        return self._preview(self.wt)

    def tool_submit(self, hypothesis: str, predicted_effects: list[str], summary: str,
                    skill: str | None = None, trigger: str | None = None) -> str:
        problems = [p for e in predicted_effects if (p := check_effect(e))]
        if not hypothesis.strip():
            problems.append("hypothesis is empty: say what is wrong and why your change fixes it")
        if not summary.strip():
            problems.append("summary is empty: give a one-line commit subject")
        if not predicted_effects:
            problems.append("predict at least one effect")
        if skill and skill not in self.skills:
            problems.append(f"skill {skill!r} is not available (available: {self.skills or 'none'})")
        changed = self.changed_files()
        if not changed:
            problems.append("nothing changed: edit a harness file before submitting")
        if "harness.yaml" in changed:
            problems += self._config_problems()
        if problems:
            raise ToolError("not submitted: " + "; ".join(problems))
        self.submission = Submission(hypothesis.strip(), [e.strip() for e in predicted_effects],
                                     summary.strip().splitlines()[0][:100], changed, skill or None,
                                     trigger.strip() if trigger and trigger.strip() else None)
        return f"submitted: {len(changed)} file(s) changed ({', '.join(changed)})"

    # -- state --------------------------------------------------------------------------

    def changed_files(self) -> list[str]:
        """Paths that differ from the branch's base (committed previews and uncommitted edits)."""
        git_in(self.root, "add", "-A")
        out = git_in(self.root, "diff", "--cached", "--name-only", "-z", self.wt.base_commit)
        return sorted(p for p in out.split("\0") if p)

    def _config_problems(self) -> list[str]:
        try:
            data = yaml.safe_load((self.root / "harness.yaml").read_text())
            HarnessConfig.model_validate(data)
        except yaml.YAMLError as exc:
            return [f"harness.yaml is not valid YAML: {exc}"]
        except ValidationError as exc:
            return [f"harness.yaml: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        return []


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _disagrees(row: dict, hack: bool | None = None) -> bool:
    reward, verified = _num(row.get("reward")), _num(row.get("verified"))
    if reward is None or verified is None or (reward >= HIGH) == (verified >= HIGH):
        return False
    return hack is None or (reward >= HIGH) == hack


def _flat_groups(rows: list[dict]) -> set[str]:
    rewards: dict[str, list[float]] = {}
    for row in rows:
        if (value := _num(row.get("reward"))) is not None:
            rewards.setdefault(str(row.get("group_id")), []).append(value)
    return {g for g, values in rewards.items() if max(values) - min(values) < 1e-9}


# The digest's trusted failure modes, recomputed over the rows (the digest keeps only a few examples).
TRUSTED_MODES: dict[str, Callable[[dict], bool]] = {
    "reward_hacking": lambda r: _disagrees(r, hack=True),
    "reward_misses": lambda r: _disagrees(r, hack=False),
    "truncation": lambda r: bool(r.get("truncated")),
    "no_final_answer": lambda r: isinstance(r.get("verifier_info"), dict)
    and str(r["verifier_info"].get("reason") or "").strip().lower() in NO_FINAL_ANSWER_REASONS,
}


def select_trajectories(rows: list[dict], kind: str, failure_mode: str | None, digest: dict,
                        rng: random.Random) -> list[dict]:
    """The rows a ``query_trajectories`` call asks for (``kind``: disagreement | failure | random)."""
    if kind == "disagreement":
        return [r for r in rows if _disagrees(r)]
    if kind == "random":
        return rng.sample(rows, len(rows))
    if kind != "failure":
        raise FormatError(f"kind must be disagreement, failure or random, got {kind!r}")
    modes = {str(m.get("name")): m for m in digest.get("failure_modes", []) if isinstance(m, dict)}
    names = sorted(set(modes) | set(TRUSTED_MODES) | {"zero_variance_groups"})
    if failure_mode not in names:
        raise ToolError(f"failure_mode {failure_mode!r} is unknown; the digest names {', '.join(names)}")
    if failure_mode in TRUSTED_MODES:
        return [r for r in rows if TRUSTED_MODES[failure_mode](r)]
    if failure_mode == "zero_variance_groups":
        flat = _flat_groups(rows)
        return [r for r in rows if str(r.get("group_id")) in flat]
    ids = [str(e.get("traj_id")) for e in modes[failure_mode].get("examples", []) if isinstance(e, dict)]
    return [r for r in rows if str(r.get("traj_id")) in ids]


def _trajectory_card(row: dict) -> dict:
    """One archived trajectory as the model sees it: excerpts plus reward and verifier outcome."""
    return {
        "traj_id": row.get("traj_id"), "group_id": row.get("group_id"), "task_id": row.get("task_id"),
        "data_source": row.get("data_source"), "reward": row.get("reward"), "verified": row.get("verified"),
        "verifier_info": row.get("verifier_info"), "truncated": row.get("truncated"),
        "finish_reason": row.get("finish_reason"), "response_tokens": row.get("response_tokens"),
        "ground_truth": row.get("ground_truth"),
        "prompt": excerpt(row.get("prompt"), EXCERPT_HEAD, EXCERPT_TAIL),
        "response": excerpt(row.get("response"), EXCERPT_HEAD, EXCERPT_TAIL),
    }
