"""Recipes for the harness's own diagnostics: restore a seed diagnostic that went silent, or guard one that crashes
on a plausible batch (``main:diagnostic_crashed``, ``meta_agent.constructed_checks``).

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


CRASHED = "main:diagnostic_crashed"
"""main's diagnostics crashed on a constructed batch (``meta_agent.constructed_checks``)."""


def restore_diagnostic(d: dict, f: HarnessFiles) -> Decision:
    """A diagnostic of main's crashed on a constructed batch (``main:diagnostic_crashed``) -> main's own version,
    guarded where it raised; or a trusted mode was seen, but the seed diagnostic that watches it reported nothing ->
    restore the seed's."""
    crashed = next((m for m in d.get("failure_modes") or [] if m.get("name") == CRASHED
                    and isinstance((m.get("evidence") or {}).get("crashed"), dict)), None)
    if crashed is not None and (change := _repair_crash(crashed, f)) is not None:
        return change
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


GUARD = """

# Guarded by the repair loop: on {batches} this diagnostic raised in place of reporting. Such a batch now gets
# an info finding saying it was not measured there; every other batch gets what the code above reports.
_unguarded_diagnose = diagnose


def diagnose(*args, **kwargs):
    try:
        found = _unguarded_diagnose(*args, **kwargs)
    except (ArithmeticError, LookupError, ValueError, TypeError, AttributeError) as exc:
        return [{{"name": {name!r}, "severity": "info", "rate": 0.0, "example_ids": [],
                 "message": {said!r} + type(exc).__name__}}]
    return found if isinstance(found, list) else []
"""
"""Appended to a diagnostic that crashed on a constructed batch: main's own code keeps running, and a batch it cannot
handle reports so as an info finding of the same diagnostic (the ratchet reads a crash that now reports as repaired,
``meta_agent.judge.findings``; the trusted digest still measures its mode)."""


def _repair_crash(found: dict, f: HarnessFiles) -> Change | None:
    """Main's own version of each crashed diagnostic, guarded (:data:`GUARD`): the repair keeps what the diagnostic
    measures and is derived from where it crashed, never from the seed (a harness's first version may crash too).
    None when no crashed diagnostic is a file of main's (a crash the runtime reports under another name)."""
    files, done = {}, []
    for stem, batches in sorted(found["evidence"]["crashed"].items()):
        now = f.diagnostics.get(stem)
        if now is None or "_unguarded_diagnose = diagnose" in now:
            continue  # not a file of main's, or guarded once already: what still crashes is not an exception
        files[f"diagnostics/{stem}.py"] = now.rstrip("\n") + "\n" + GUARD.format(
            batches=", ".join(batches), name=f"{stem}_unmeasured", said=f"{stem} could not measure this batch: ")
        done.append(f"diagnostics/{stem}.py crashed on {', '.join(batches)}")
    if not files:
        return None
    stems = [p.removeprefix("diagnostics/").removesuffix(".py") for p in files]
    return Change(
        "restore-diagnostic", "restore-diagnostic:crashed:" + ",".join(stems), max(0.5, float(found["rate"])),
        f"Guard the diagnostics that crash on plausible batches: {', '.join(stems)}",
        f"{CRASHED} (rate {float(found['rate']):.3f}): {found.get('message', '')}"[:400],
        "A diagnostic that crashes on a batch a round can produce (nothing truncated, all right, empty answers) "
        "reports a crash in place of its finding, so a round that meets that batch reads nothing of what it "
        "watches; " + "; ".join(done) + ". Main's own code is kept and guarded: a batch on which it raises "
        "gets an info finding that it was not measured, every other batch what it reported before. Rewards, "
        "filters and prompts are unchanged, so training is exactly main's.",
        [f"finding {stem}:crashed guard: the guarded diagnostic no longer crashes" for stem in stems], files,
        f"{CRASHED} names a diagnostic file of main's", root_cause=True)
