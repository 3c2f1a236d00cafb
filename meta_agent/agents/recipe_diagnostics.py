"""Recipes for the harness's own diagnostics: guard one that crashes on a plausible batch (``main:diagnostic_crashed``,
``meta_agent.constructed_checks``), calibrate one whose rate disagrees with the trusted digest's
(``main:diagnostic_disagrees``, ``meta_agent.diagnostic_checks``) or that went silent where the digest saw its mode,
make one whose examples are not of the mode it reports name that mode's rows (``main:diagnostic_examples``,
``meta_agent.diagnostic_examples``).

The trusted digest measures its failure modes whatever the harness does; the harness's diagnostics are
its own eyes, which the LLM agent reads in the digest and may revise.  A diagnostic that reports nothing
at all on a round where the trusted digest saw its mode (a ``diagnose`` that returns ``[]``) hides the
mode from every later revision.  The change is bookkeeping: rewards, keep masks and prompts stay as they
are, so the gate judges it as training exactly as main does (``meta_agent.gate``: diagnostics only).

    from meta_agent.agents.recipe_diagnostics import restore_diagnostic
    decision = restore_diagnostic(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from harness_repo.repo import SEEDS_DIR
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.diagnostic_checks import CALIBRATE, MEASURES, MODES, PREFIX, watched_mode
from meta_agent.diagnostic_examples import NAME as EXAMPLES_NAME
from meta_agent.diagnostic_examples import chosen

DISAGREES = PREFIX + "diagnostic_disagrees"
"""main's diagnostic reports a rate the trusted digest does not measure on one batch (``diagnostic_checks``)."""


EXAMPLES = PREFIX + EXAMPLES_NAME
"""main's diagnostic names examples (or a count) not of the mode it reports (``diagnostic_examples``)."""
CRASHED = "main:diagnostic_crashed"
"""main's diagnostics crashed on a constructed batch (``meta_agent.constructed_checks``)."""


def restore_diagnostic(d: dict, f: HarnessFiles) -> Decision:
    """A diagnostic of main's crashed on a constructed batch (``main:diagnostic_crashed``) -> main's own version,
    guarded where it raised; one reports a rate the trusted digest does not measure on the same batch
    (``main:diagnostic_disagrees``), or reports nothing where the digest saw the mode it watches -> main's own
    version, calibrated (:data:`CALIBRATE`: its finding carries the rate measured as the digest measures it); one
    whose examples are not of the mode it reports (``main:diagnostic_examples``) -> main's own version naming the
    mode's rows (``diagnostic_examples.CHOOSE``).  Never the seed's version: a seed file is no target (a harness's
    first version may be wrong too)."""
    modes = d.get("failure_modes") or []
    crashed = next((m for m in modes if m.get("name") == CRASHED
                    and isinstance((m.get("evidence") or {}).get("crashed"), dict)), None)
    if crashed is not None and (change := _repair_crash(crashed, f)) is not None:
        return change
    domain = str(f.config.get("domain"))
    disagrees = next((m for m in modes if m.get("name") == DISAGREES
                      and isinstance((m.get("evidence") or {}).get("disagrees"), dict)), None)
    change = _repair_disagreement(disagrees, f, domain) if disagrees is not None else None
    examples = next((m for m in modes if m.get("name") == EXAMPLES
                     and isinstance((m.get("evidence") or {}).get("findings"), dict)), None)
    if examples is not None:
        change = _repair_examples(examples, f, domain, change)
    if change is not None:
        return change
    reported = {watched_mode(str(m.get("name"))) for m in modes if m.get("source") == "diagnostics"}
    seen = {str(m.get("name")): float(m.get("rate") or 0.0) for m in modes
            if m.get("source") == "trusted" and (m.get("rate") or 0.0) > 0}
    for mode, rate in sorted(seen.items(), key=lambda kv: -kv[1]):
        if mode not in MODES or mode in reported or not _measurable(mode, domain):
            continue
        watching = _watching(f, mode, SEEDS_DIR / domain / "diagnostics")
        if not watching:
            continue
        stem, name = watching[0]
        path = f"diagnostics/{stem}.py"
        how = "its name" if _names_in(f.diagnostics[stem]) or watched_mode(stem) == mode else "it names no finding"
        return Change(
            "restore-diagnostic", f"restore-diagnostic:silent:{stem}", min(1.0, rate),
            f"Make {path} report {mode} again: it reported nothing while the digest saw it",
            f"the trusted digest saw {mode} at rate {rate:.3f}; no diagnostic reported it, and {path} watches it "
            f"({how}).",
            f"The harness's own {stem} diagnostic went silent, so its findings (and any revision of them) miss "
            f"{mode}. Its code is kept; a finding {name} is added where it reports none, with the rate measured "
            "as the trusted digest measures it. Rewards, filters and prompts are unchanged, so training is "
            "exactly main's.",
            [f"finding {name} added: the diagnostic reports {mode} again"],
            {path: _calibrated(f.diagnostics[stem], name, mode, f"it reported nothing while the digest saw {mode}")},
            f"a trusted mode with rate > 0, no finding reporting it, and {path} named for it ({how})", root_cause=True)
    return ("no diagnostic crashed or disagrees, and every mode the digest saw is reported (or no diagnostic of "
            "main's is named for it)")


def _measurable(mode: str, domain: str) -> bool:
    """Whether :data:`CALIBRATE` can measure ``mode`` from what harness code sees (a final answer: math's form)."""
    return mode != "no_final_answer" or domain == "math"


def _names_in(text: str) -> list[str]:
    """The finding names a diagnostic's source writes as ``"name": "<literal>"``, in order."""
    return re.findall(r"""["']name["']\s*:\s*["']([a-z][a-z0-9_:.-]*)["']""", text)


def _watching(f: HarnessFiles, mode: str, seed_dir: Path) -> list[tuple[str, str]]:
    """(stem, finding name) of each diagnostic of main's named for ``mode`` (by its stem or a finding name in its
    source), not calibrated yet and not the seed's own (silent for a reason of its own: an empty round); where none
    is, the one diagnostic of main's whose source names no finding, under the mode's name."""
    out = []
    for stem, text in sorted(f.diagnostics.items()):
        seed = seed_dir / f"{stem}.py"
        if "_uncalibrated_diagnose = diagnose" in text or (seed.is_file() and seed.read_text() == text):
            continue
        names = [n for n in _names_in(text) if watched_mode(n) == mode]
        if names or watched_mode(stem) == mode:
            out.append((stem, names[0] if names else stem))
    if out:
        return out
    # none is named for the mode: a diagnostic of main's whose code names no finding at all reports nothing any
    # reader can match, whatever its file is called; the only such one is given the mode (under the mode's name)
    mute = [stem for stem, text in sorted(f.diagnostics.items()) if not _names_in(text)
            and "_uncalibrated_diagnose = diagnose" not in text and not (
                (seed_dir / f"{stem}.py").is_file() and (seed_dir / f"{stem}.py").read_text() == text)]
    return [(mute[0], mode)] if len(mute) == 1 else []


def _file_of(f: HarnessFiles, finding: str, diagnostic: str | None) -> str | None:
    """The stem of main's diagnostic that reports ``finding``: the runtime's word, else the file whose source names
    it, else the file of that stem."""
    stem = str(diagnostic or "").removesuffix(".py")
    if stem in f.diagnostics:
        return stem
    named = [s for s, text in sorted(f.diagnostics.items()) if finding in _names_in(text)]
    return named[0] if named else finding if finding in f.diagnostics else None


def _repair_disagreement(found: dict, f: HarnessFiles, domain: str) -> Change | None:
    """Main's own version of each disagreeing diagnostic, calibrated; None when none is a file of main's (or each
    is calibrated once already: what still disagrees is not this recipe's)."""
    files, done, claims = {}, [], []
    for name, e in sorted(found["evidence"]["disagrees"].items()):
        stem, mode = _file_of(f, name, e.get("diagnostic")), e.get("mode")
        path = f"diagnostics/{stem}.py"
        if stem is None or mode not in MODES or not _measurable(mode, domain) or path in files \
                or "_uncalibrated_diagnose = diagnose" in f.diagnostics[stem]:
            continue
        figures = ", ".join(f"{b}: {r} vs {t}" for b, (r, t) in list(zip(e["batches"], e["figures"]))[:3])
        files[path] = _calibrated(f.diagnostics[stem], name, mode, f"it reported {figures} (reported vs trusted)")
        done.append(f"{path}'s {name} on {figures}")
        claims.append(f"finding {name} calibrated: it reports {mode} as the trusted digest measures it")
    if not files:
        return None
    return Change(
        "restore-diagnostic", "restore-diagnostic:disagrees:" + ",".join(sorted(files)), max(0.5, float(found["rate"])),
        "Calibrate the diagnostics whose rate disagrees with the trusted digest's: " + ", ".join(sorted(files)),
        f"{DISAGREES} (rate {float(found['rate']):.3f}): {found.get('message', '')}"[:400],
        "A diagnostic that reports a rate the trusted digest does not measure on the same batch tells every reader "
        "of the digest something false about the round; " + "; ".join(done) + ". Main's own code is kept and "
        "still runs; its finding now carries the rate measured as the trusted digest measures it. Rewards, filters "
        "and prompts are unchanged, so training is exactly main's.",
        claims, files, f"{DISAGREES} names a diagnostic file of main's", root_cause=True)


def _repair_examples(found: dict, f: HarnessFiles, domain: str, change: Change | None) -> Change | None:
    """``change`` (a calibration, or None) with main's own version of each diagnostic whose examples were not of its
    mode made to name the mode's rows (``diagnostic_examples.CHOOSE``, over the calibrated text where both apply);
    None when none is a file of main's not chosen for already."""
    files = dict(change.files) if change is not None else {}
    done, claims = [], []
    for name, e in sorted(found["evidence"]["findings"].items()):
        stem, mode = _file_of(f, name, e.get("diagnostic")), e.get("mode")
        path = f"diagnostics/{stem}.py"
        text = files.get(path) or (f.diagnostics[stem] if stem is not None else "")
        if stem is None or mode not in MODES or not _measurable(mode, domain) \
                or "_unexampled_diagnose = diagnose" in text:
            continue
        said = [f"examples {', '.join(e['wrong'][:3])}"] if e.get("wrong") else []
        said += [f"count {s} vs trusted {t} on {b}" for b, s, t in (e.get("counts") or [])[:1]]
        said += [f"a warning naming no example on {', '.join(e['blank'][:2])}"] if e.get("blank") else []
        why = f"on {', '.join(e['batches'][:3])} it showed {'; '.join(said)} (not of {mode})"
        files[path] = chosen(text, name, mode, why, recount=bool(e.get("counts")))
        done.append(f"{path}'s {name} {why}")
        claims.append(f"finding {name} calibrated: its examples (and any count it states) are rows of {mode}")
    if not done:
        return change
    why = ("A diagnostic whose examples are not instances of what it reports shows every reader of the digest the "
           "wrong rows as what the failure looks like; " + "; ".join(done) + ". Main's own code is kept and still "
           "runs; its finding keeps its rate and severity and names as examples the rows of its mode, as the trusted "
           "digest judges them. Rewards, filters and prompts are unchanged, so training is exactly main's.")
    if change is not None:  # one calibration: a finding claimed once
        claimed = {c.split(":")[0] for c in change.effects}
        return replace(change, key=change.key + "+examples", subject=change.subject + " (and their examples)",
                       hypothesis=change.hypothesis + " " + why, files=files,
                       effects=change.effects + [c for c in claims if c.split(":")[0] not in claimed])
    return Change(
        "restore-diagnostic", "restore-diagnostic:examples:" + ",".join(sorted(files)),
        max(0.5, float(found["rate"])),
        "Make the diagnostics whose examples are not of their mode name its rows: " + ", ".join(sorted(files)),
        f"{EXAMPLES} (rate {float(found['rate']):.3f}): {found.get('message', '')}"[:400], why, claims, files,
        f"{EXAMPLES} names a diagnostic file of main's", root_cause=True)


def _calibrated(text: str, name: str, mode: str, why: str) -> str:
    """``text`` calibrated (:data:`CALIBRATE`), its finding's examples the mode's rows as well
    (``diagnostic_examples.CHOOSE``: a calibrated rate shown with the old code's rows would show the wrong ones)."""
    return chosen(text.rstrip("\n") + "\n" + CALIBRATE.format(
        name=name, mode=mode, why=why.replace("\n", " ")[:200], warn=MODES[mode].warn_above,
        measure=MEASURES[mode]), name, mode, "its rate was calibrated", recount=False)


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
