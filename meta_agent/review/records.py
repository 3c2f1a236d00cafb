"""What a run recorded about one intervention or one round, gathered into plain dicts.

``show`` prints these, ``show --json`` dumps them and the HTML report renders them, so the three
never disagree.  Everything comes from what the run wrote: the harness git (trailers, merges, verdict
tags, reverts, skills), ``rounds/<n>/`` (digest, proposals, backtest reports) and ``backtests/``.
What is absent is said in ``missing`` rather than guessed.  Read-only.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from harness_repo.gitcmd import git_try, run_git
from harness_repo.repo import HarnessRepo, Intervention
from harness_repo.trailers import parse_trailers
from meta_agent.errors import UserError
from meta_agent.run_dir import RunDir

GATE_MARGINS = {"error_rate": ("max_error_rate", "cand. <= {}"), "kept_share": ("min_kept_share", "cand. >= {}"),
                "hack_rate": ("hack_rate_margin", "change <= +{}"),
                "failure_pay": ("failure_pay_margin", "change <= +{}"),
                "reward_auc": ("auc_margin", "change >= -{}"), "signal_share": ("signal_margin", "change >= -{}")}
"""Each gated backtest metric -> (its threshold in the report's ``thresholds``, the rule in words)."""


class NameNotFound(UserError):
    """``show`` of a name that is no intervention branch, commit or round; the message lists the nearest."""


UNDEFINED_WHY = {
    "hack_rate": "no verified failure in the sample", "failure_pay": "no verified failure in the sample",
    "miss_rate": "no verified success in the sample", "reward_auc": "the sample needs verified successes and failures",
    "failure_spread": "no group without a verified success",
    "flat_failure_share": "no group without a verified success",
    "signal_share": "no group with a kept trajectory", "kept_share": "no trajectory in the sample",
    "audit_miss_rate": "fewer than 5 groups, too few for an interval, or no audited right answer",
    "audit_hack_rate": "fewer than 5 groups, too few for an interval, or no audited wrong answer",
}
"""Why a gate metric can be undefined on a sample: shown in words where a figure would read ``nan``."""


def undefined(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)


SOURCES = {"trusted": "trusted digest", "diagnostics": "harness diagnostic"}
"""Who found a failure mode: the trusted digest's own figures, or the harness's diagnostics (quoted data)."""


def source_name(finding: dict) -> str:
    """``trusted digest``, ``harness diagnostic``, or both (``trusted+diagnostics``, a mode both found)."""
    sources = str(finding.get("source") or "").split("+")
    return ", ".join(SOURCES.get(s, s) for s in sources if s) or "source not recorded"


def merged_findings(modes: list) -> list[dict]:
    """A round's failure modes with one entry per mode and rate: the digest's and the harness's own report of the
    same thing (``truncation 0.125`` twice, with the same examples) become one finding naming both sources."""
    out: dict[tuple, dict] = {}
    for f in modes:
        if not isinstance(f, dict):
            continue
        key = (f.get("name"), f.get("rate"))
        if key in out and f.get("source") not in str(out[key].get("source")).split("+"):
            out[key] = out[key] | {"source": f"{out[key].get('source')}+{f.get('source')}"}
        else:
            out.setdefault(key, dict(f))
    return list(out.values())


def read_json(path: Path) -> Any:
    """The JSON in ``path``, or None when it is absent or unreadable (a run killed mid-write, a hand edit)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def rounds(rd: RunDir) -> list[int]:
    folder = rd.path / "rounds"
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []


def digests(rd: RunDir) -> list[dict]:
    """The digest of every round that has a readable one, by round."""
    found = [read_json(rd.round_dir(n) / "digest.json") for n in rounds(rd)]
    return [d for d in found if isinstance(d, dict)]


def backtest_report(rd: RunDir, iv: Intervention) -> tuple[Path | None, dict | None]:
    """The newest backtest report of ``iv``: the round's (the loop, the demo) or the run's (``backtest``)."""
    folder = iv.branch.replace("/", "_")
    paths = [p for p in (rd.round_dir(iv.round) / "backtests" / folder / "report.json",
                         rd.backtests / folder / "report.json") if p.exists()]
    for path in sorted(paths, key=lambda p: p.stat().st_mtime, reverse=True):
        report = read_json(path)
        if isinstance(report, dict):
            return path, report
    return (paths[0] if paths else None), None


def _metric_rows(report: dict) -> list[dict]:
    gate = report.get("gate") or {}
    checks = {c.get("name"): c for c in gate.get("checks") or [] if isinstance(c, dict)}
    thresholds = report.get("thresholds") or {}
    rows = []
    for name, m in (gate.get("metrics") or {}).items():
        if not isinstance(m, dict):
            continue
        key, rule = GATE_MARGINS.get(name, (None, ""))
        check = checks.get(name)
        rows.append({"name": name, "main": m.get("main"), "candidate": m.get("candidate"), "delta": m.get("delta"),
                     "ci_low": m.get("ci_low"), "ci_high": m.get("ci_high"),
                     "rule": rule.format(thresholds[key]) if key in thresholds else None,
                     "passed": None if check is None else bool(check.get("passed")),
                     "undecided": bool(check and check.get("undecided")),
                     "undefined": (UNDEFINED_WHY.get(name, "no data for it in the sample")
                                   if any(undefined(m.get(k)) for k in ("main", "candidate", "delta")) else None)})
    return rows


def _skill(repo: HarnessRepo, iv: Intervention) -> dict | None:
    """The skill commit on main that names ``iv`` as its confirmation, with the skill file it added."""
    out = run_git(repo.path, "log", "--format=%H", f"--grep=^Confirmed-By: {iv.branch}$", "main")
    for sha in out.split():
        files = [f for f in run_git(repo.path, "show", "--format=", "--name-only", sha).split()
                 if f.startswith("skills/")]
        return {"commit": sha, "file": files[0] if files else None,
                "name": (repo.message(sha).split("\n")[0].removeprefix("Skill ").split(":")[0]).strip()}
    return None


def intervention_record(rd: RunDir, repo: HarnessRepo, branch: str) -> dict:
    """Everything the run recorded about one intervention; ``missing`` names what it did not."""
    iv = repo.intervention(branch)
    missing: list[str] = []
    diff = run_git(repo.path, "diff", iv.base, iv.head) if iv.base else ""
    files = repo.changed_paths(iv.branch, iv.base) if iv.base else []
    if not iv.hypothesis:
        missing.append("no Hypothesis: trailer on the branch's commits (trailers missing or malformed)")
    if not iv.predicted_effects:
        missing.append("no Predicted-Effect: trailer on the branch's commits")
    path, report = backtest_report(rd, iv)
    backtest = None
    if report is not None:
        gate = report.get("gate") or {}
        backtest = {"report": str(path), "main_commit": report.get("main_commit"),
                    "candidate_commit": report.get("candidate_commit"), "sample": (report.get("sample") or {}).get(
                        "definition"), "decision": report.get("decision"), "reasons": list(report.get("reasons") or []),
                    "metrics": _metric_rows(report),
                    "checks": [c for c in gate.get("checks") or [] if isinstance(c, dict)],
                    "effects": [e for e in gate.get("effects") or [] if isinstance(e, dict)],
                    "probation": bool(gate.get("probation"))}
    elif path is not None:
        missing.append(f"backtest report {path} is unreadable")
    else:
        missing.append("no backtest report (never backtested, or the run stopped before its backtest)")
    live = [dict(check, round=d.get("round")) for d in digests(rd) for check in d.get("live_checks") or []
            if isinstance(check, dict) and check.get("branch") == iv.branch]
    revert = None
    if iv.revert_commit:
        message = repo.message(iv.revert_commit)
        paragraphs = message.strip().split("\n\n")
        evidence = {k: v for k, v in parse_trailers(message).items() if k in ("Live-Check", "Tripwire", "Restores")}
        revert = {"commit": iv.revert_commit, "subject": paragraphs[0].splitlines()[0],
                  "reason": paragraphs[1] if len(paragraphs) > 1 else paragraphs[0], "evidence": evidence}
    trailers = iv.trailers
    return {
        "kind": "intervention", "branch": iv.branch, "round": iv.round, "status": iv.status, "head": iv.head,
        "base": iv.base, "subject": iv.subject, "hypothesis": iv.hypothesis,
        "predicted_effects": iv.predicted_effects,
        "author": {"agent": (trailers.get("Agent") or [None])[-1], "model": (trailers.get("Model") or [None])[-1],
                   "tokens": (trailers.get("Tokens") or [None])[-1], "cost": (trailers.get("Cost") or [None])[-1]},
        "files": files, "diff": diff, "backtest": backtest, "verdict": iv.verdict, "evidence": iv.evidence,
        "merge_commit": iv.merge_commit, "revert": revert, "live": live, "skill": _skill(repo, iv),
        "missing": missing,
    }


def round_record(rd: RunDir, repo: HarnessRepo, n: int) -> dict:
    """One round: the digest's findings with examples, the proposals and their fates, and the exam."""
    rdir = rd.round_dir(n)
    missing: list[str] = []
    digest = read_json(rdir / "digest.json")
    if not isinstance(digest, dict):
        missing.append(f"no digest ({rdir / 'digest.json'} "
                       f"{'unreadable' if (rdir / 'digest.json').exists() else 'absent'}):"
                       " the round stopped before its digest was written")
        digest = {}
    phase = (rd.state().get("rounds") or {}).get(str(n), {})
    proposals = read_json(rdir / "proposals.json")
    ivs = {iv.branch: iv for iv in repo.interventions() if iv.round == n}
    fates = []
    for p in proposals if isinstance(proposals, list) else []:
        branch = p.get("branch") if isinstance(p, dict) else None
        iv = ivs.pop(branch, None) if branch else None
        fates.append({"branch": branch, "hypothesis": (p or {}).get("hypothesis"),
                      "status": iv.status if iv else "branch missing", "verdict": iv.verdict if iv else None})
    fates += [{"branch": iv.branch, "hypothesis": iv.hypothesis, "status": iv.status, "verdict": iv.verdict}
              for iv in ivs.values()]
    if not isinstance(proposals, list):
        missing.append("no proposals.json (the agent had not finished, or the run was not made by the loop)")
    findings = [{"name": f.get("name"), "source": f.get("source"), "severity": f.get("severity"), "rate": f.get("rate"),
                 "message": f.get("message"), "examples": list(f.get("examples") or [])[:3]}
                for f in merged_findings(digest.get("failure_modes") or [])]
    heldout = digest.get("heldout") or {}
    exam = {"accuracy": heldout.get("accuracy") or digest.get("heldout_accuracy"), "vs_base": heldout.get("vs_base"),
            "base": heldout.get("base")}
    if exam["accuracy"] is None:
        missing.append("no held-out exam figure this round")
    from meta_agent.review.losses import loss_lines  # reads the archive's ledger; writes nothing

    missing += loss_lines(rd.archive, str(rd.config().get("run_id") or rd.path.name), round_=n)
    return {"kind": "round", "round": n, "phase": phase, "figures": {k: digest.get(k) for k in (
        "n_trajectories", "n_groups", "reward_mean", "verified_mean", "zero_variance_share", "kept_share",
        "truncation_rate", "hack_rate", "miss_rate")}, "findings": findings, "proposals": fates, "exam": exam,
        "live_checks": list(digest.get("live_checks") or []), "rollback": digest.get("rollback"), "missing": missing}


def names(rd: RunDir, repo: HarnessRepo) -> list[str]:
    """Every name ``show`` accepts: intervention branches and round numbers."""
    return [iv.branch for iv in repo.interventions()] + [str(n) for n in rounds(rd)]


def resolve(rd: RunDir, repo: HarnessRepo, name: str) -> tuple[str, str | int]:
    """``("intervention", branch)`` or ``("round", n)`` for a branch, a commit on one, a round number or ``r<n>``."""
    known = names(rd, repo)
    branches = [n for n in known if n.startswith("iv/")]
    if name in branches or f"iv/{name}" in branches:
        return "intervention", name if name in branches else f"iv/{name}"
    digits = name.removeprefix("round").removeprefix("r").strip()
    if digits.isdigit() and digits in known:
        return "round", int(digits)
    if len(name) >= 4 and all(c in "0123456789abcdef" for c in name.lower()):
        status, out, _ = git_try(repo.path, "rev-parse", "--verify", "-q", f"{name}^{{commit}}")
        if status == 0:
            sha = out.strip()
            for iv in repo.interventions():  # the branch whose commits (or merge) hold this sha
                if sha in (iv.head, iv.merge_commit, iv.revert_commit) or (
                        iv.base and git_try(repo.path, "merge-base", "--is-ancestor", sha, iv.head)[0] == 0
                        and git_try(repo.path, "merge-base", "--is-ancestor", iv.base, sha)[0] == 0 and sha != iv.base):
                    return "intervention", iv.branch
    done = [str(n) for n in rounds(rd)]
    if digits.isdigit():  # a round the run does not have: name every round it has, not the nearest strings
        raise NameNotFound(f"{name!r} is no round of {rd.path}; its rounds are "
                           + (", ".join(done) if done else "none yet") + "; interventions: "
                           + (", ".join(branches[:5]) + (", ..." if len(branches) > 5 else "") if branches else "none"))
    near = difflib.get_close_matches(name, known, n=5, cutoff=0.3) or known[:5]
    raise NameNotFound(f"{name!r} is no intervention branch, commit or round of {rd.path}; nearest: "
                      + (", ".join(near) if near else "none (the run has no interventions or rounds yet)")
                      + (f"; its rounds are {', '.join(done)}" if done else ""))
