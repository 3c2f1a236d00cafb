"""The repair benchmark's shared parts (``bench/repair_bench.py``'s offline tier and ``bench/repair_live.py``'s live
tier): which of a flaw's modes a digest named, the flaw's trusted repair check on a ref, the agent of an arm, and
the stamp and results file every cell record goes through."""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import time
from pathlib import Path

from repair_flaws import CONTROL, FLAW_LIST, FLAWS, probes, sample
from repair_observe import observe
from random_edits import BestOfNAgent, RandomEditAgent

from harness_repo.repo import HarnessRepo
from meta_agent import registry
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.agents.recipes import RECIPES_VERSION
from meta_agent.agents.search import SearchAgent
from meta_agent.budget import Budget
from meta_agent.run_config import RunConfig
from sandboxes.base import Sandbox
from sandboxes.docker import DockerSandbox

RESULTS = Path(__file__).with_name("repair_results.jsonl")
RESULT = "result.json"
NAMED_SEVERITIES = ("warning", "error")
PREVIEWING_ARMS = ("search", "best-of-n")
"""Arms that preview generation edits with round 0's policy (the others read only its archive and digest)."""



def names(digest: dict, flaw: str) -> list[str]:
    """The flaw's modes the digest raised as a warning or error."""
    modes = FLAWS[flaw].modes if flaw in FLAWS else ()
    return sorted({str(m.get("name")) for m in digest.get("failure_modes") or []
                   if m.get("name") in modes and m.get("severity") in NAMED_SEVERITIES})


def check(flaw: str, repo: HarnessRepo, ref: str, dest: Path, sandbox: Sandbox) -> tuple[bool, str]:
    """The flaw's repair check on ``ref`` (for the control: no flaw's symptom shows).

    ``ref`` may be an agent's branch: its harness code runs only in the sandboxed runtime (``observe``).
    """
    shutil.rmtree(dest, ignore_errors=True)
    obs = observe(repo.export(ref, dest), sandbox, probes=probes())
    if flaw == CONTROL:
        shown = [f"{f.name}: {s}" for f in FLAW_LIST if (s := f.symptom(obs))]
        return not shown, "; ".join(shown) or "no flaw's symptom"
    return FLAWS[flaw].repaired(obs)


def agent_for(arm: str, flaw: str, seed: int, args: argparse.Namespace, sandbox: DockerSandbox, run_id: str):
    if arm == "recipe":
        return RecipeAgent()
    if arm == "random-edit":  # each flaw its own draw (compare_arms: the same key, args.cell)
        return RandomEditAgent(seed, cell=flaw)
    if arm == "search":
        return SearchAgent()
    if arm == "best-of-n":  # N random edits, each previewed, the best kept (random-edit keeps every draw)
        return BestOfNAgent(seed, cell=flaw, n=args.best_of)
    config = RunConfig(run_id=run_id, domain=args.domain, agent="llm", model=args.model, api_base=args.api_base)
    return registry.make_agent("llm", config, Budget(), sandbox)


@functools.cache
def _code() -> str | None:
    """The commit this bench runs at (``+changes`` when files other than the results differ from it), or None
    outside a git checkout: a cell's record says which code produced it."""
    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no", "--",
                                  ".", ":(exclude)bench/repair_results.jsonl"], capture_output=True, text=True,
                                 check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if changed else "")


def stamp(flaw: str) -> dict:
    """Which code and recipe set produced a cell, and whether its flaw was held out from that recipe set."""
    planted = FLAWS[flaw].recipes_version if flaw in FLAWS else None
    return {"date": time.strftime("%Y-%m-%d"), "code": _code(), "recipes_version": RECIPES_VERSION,
            "planted_against": planted, "sample": sample(flaw)}


def append(results: Path, record: dict) -> None:
    results.parent.mkdir(parents=True, exist_ok=True)
    with results.open("a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
