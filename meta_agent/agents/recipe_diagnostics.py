"""Recipes for the harness's own diagnostics: restore a seed diagnostic that went silent.

The trusted digest measures its failure modes whatever the harness does; the harness's diagnostics are
its own eyes, which the LLM agent reads in the digest and may revise.  A diagnostic that reports nothing
at all on a round where the trusted digest saw its mode (a ``diagnose`` that returns ``[]``) hides the
mode from every later revision.  The change is bookkeeping: rewards, keep masks and prompts stay as they
are, so the gate judges it as training exactly as main does (``meta_agent.gate``: diagnostics only).

    from meta_agent.agents.recipe_diagnostics import restore_diagnostic
    decision = restore_diagnostic(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from harness_repo.repo import SEEDS_DIR
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles

SEED_DIAGNOSTIC = {"truncation": "truncation", "zero_variance_groups": "zero_variance",
                   "no_final_answer": "format_failures"}
"""Trusted digest mode -> the seed diagnostic (``diagnostics/<stem>.py``, finding ``<stem>``) that watches it."""


def restore_diagnostic(d: dict, f: HarnessFiles) -> Decision:
    """A trusted mode was seen, but the seed diagnostic that watches it reported nothing -> restore the seed's."""
    modes = d.get("failure_modes") or []
    reported = {str(m.get("name")) for m in modes if m.get("source") == "diagnostics"}
    seen = {str(m.get("name")): float(m.get("rate") or 0.0) for m in modes
            if m.get("source") == "trusted" and (m.get("rate") or 0.0) > 0}
    seed_dir = SEEDS_DIR / str(f.config.get("domain")) / "diagnostics"
    for mode, rate in sorted(seen.items(), key=lambda kv: -kv[1]):
        stem = SEED_DIAGNOSTIC.get(mode)
        if stem is None or stem in reported or not (seed_dir / f"{stem}.py").is_file():
            continue
        seed = (seed_dir / f"{stem}.py").read_text()
        if f.diagnostics.get(stem) == seed:
            continue  # the seed's own diagnostic, silent for a reason of its own (an empty round)
        path = f"diagnostics/{stem}.py"
        return Change(
            "restore-diagnostic", f"restore-diagnostic:{stem}", min(1.0, rate),
            f"Restore the seed's {path}: it reported nothing while the digest saw {mode}",
            f"the trusted digest saw {mode} at rate {rate:.3f}; {path} reported no finding at all.",
            f"The harness's own {stem} diagnostic went silent, so its findings (and any revision of them) miss "
            f"{mode}. Restoring the seed's version makes it report again; rewards, filters and prompts are "
            "unchanged, so training is exactly main's.",
            # the gate asks a diagnostics-only branch to predict the findings it adds
            [f"finding {stem} added: the restored diagnostic reports {mode} again"], {path: seed},
            f"a trusted mode with rate > 0 and no finding from diagnostics/{stem}.py",
            root_cause=True,
        )
    return "every seed diagnostic watching a mode the digest saw reported a finding (or is the seed's own)"
