"""Skills: interventions whose effect was confirmed live, kept for reuse.

A skill is Markdown with YAML front matter (DESIGN §4): name, domains, trigger
(a condition on digest fields), the change (the branch's patch), evidence, hits,
misses and status.  It is committed to the harness repo's ``skills/`` and copied
to a cross-run library (``$META_AGENT_SKILLS`` or ``~/.cache/meta_agent/skills``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from harness_repo.failpoints import failpoint
from harness_repo.gitcmd import run_git
from harness_repo.repo import HarnessError, HarnessRepo, Intervention
from meta_agent.errors import UserError


class SkillError(UserError):
    """A skill file in the library cannot be read; the message names it."""


def library_dir() -> Path:
    return Path(os.environ.get("META_AGENT_SKILLS", Path.home() / ".cache" / "meta_agent" / "skills"))


def _patch(repo: HarnessRepo, iv: Intervention) -> str:
    return run_git(repo.path, "diff", iv.base, iv.head)


def skill_name(iv: Intervention) -> str:
    return iv.skill or re.sub(r"[^a-z0-9-]+", "-", iv.slug.lower()).strip("-")


def render_skill(iv: Intervention, meta: dict, patch: str) -> str:
    front = yaml.safe_dump(meta, sort_keys=False).strip()
    return (f"---\n{front}\n---\n\n# {meta['name']}\n\n{iv.hypothesis}\n\n"
            f"## Change\n\n```diff\n{patch.strip()}\n```\n")


def read_skill(path: Path) -> dict:
    """Front matter and body of one skill file."""
    text = path.read_text()
    if not text.startswith("---\n"):
        raise SkillError(f"{path}: a skill starts with a '---' YAML front matter block; fix or remove the file")
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front) or {}
    return meta | {"body": body, "path": str(path)}


def load_skills(domain: str | None = None, folder: Path | None = None) -> list[dict]:
    """Skills in the library (optionally those that apply to ``domain``), newest evidence first."""
    folder = folder or library_dir()
    skills = [read_skill(p) for p in sorted(folder.glob("*.md"))] if folder.is_dir() else []
    return [s for s in skills if domain is None or domain in s.get("domains", [])]


def record_skill(repo: HarnessRepo, iv: Intervention, live_round: int, verdicts: dict, before: dict, after: dict,
                 library: Path | None = None) -> Path:
    """Write (or update the hit count of) the skill distilled from a confirmed intervention."""
    name = skill_name(iv)
    folder = library or library_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    previous = read_skill(path) if path.exists() else {}
    if any(e.get("branch") == iv.branch and e.get("merge") == iv.merge_commit for e in previous.get("evidence", [])):
        # a resumed digest phase confirms the same merge again: count it once, and only commit what is missing
        text = path.read_text()
        try:
            on_main = repo.read_file("main", f"skills/{name}.md")
        except HarnessError:
            on_main = None
        if on_main != text:
            repo.commit_files({f"skills/{name}.md": text}, f"Skill {name}: confirmed live in round {live_round}",
                              {"Skill": name, "Confirmed-By": iv.branch})
        return path
    deltas = {}
    for text in verdicts:
        metric = text.split()[0]
        if isinstance(before.get(metric), (int, float)) and isinstance(after.get(metric), (int, float)):
            deltas[metric] = round(float(after[metric]) - float(before[metric]), 4)
    evidence = list(previous.get("evidence", [])) + [{
        "branch": iv.branch, "commit": iv.head, "merge": iv.merge_commit, "backtest": iv.evidence.get("Verdict", []),
        "live_round": live_round, "live_deltas": deltas}]
    meta = {
        "name": name,
        "domains": sorted(set(previous.get("domains", [])) | {str(before.get("domain", "math"))}),
        "trigger": (iv.trailers.get("Trigger") or [previous.get("trigger", "manual")])[0],
        "summary": iv.subject,
        "evidence": evidence,
        "hits": int(previous.get("hits", 0)) + 1,
        "misses": int(previous.get("misses", 0)),
        "status": "confirmed",
    }
    text = render_skill(iv, meta, _patch(repo, iv))
    path.write_text(text)
    failpoint("skill.recorded")
    repo.commit_files({f"skills/{name}.md": text}, f"Skill {name}: confirmed live in round {live_round}",
                      {"Skill": name, "Confirmed-By": iv.branch})
    return path


def record_miss(iv: Intervention, library: Path | None = None) -> None:
    """A refuted intervention built from a skill counts as a miss for that skill, once per branch."""
    if not iv.skill:
        return
    path = (library or library_dir()) / f"{iv.skill}.md"
    if not path.exists():
        return
    meta = read_skill(path)
    body = meta.pop("body")
    meta.pop("path")
    if iv.branch in meta.get("missed_by", []):  # a resumed phase refutes the same branch again
        return
    meta["misses"] = int(meta.get("misses", 0)) + 1
    meta["missed_by"] = [*meta.get("missed_by", []), iv.branch]
    path.write_text(f"---\n{yaml.safe_dump(meta, sort_keys=False).strip()}\n---\n{body}")
