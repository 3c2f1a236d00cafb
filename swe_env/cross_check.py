"""Specs checked against each other: a held-out task must not be a training task in disguise.

    problems = split_overlaps(spec, others)     # [] or one line per overlap, naming both specs
    refuse_overlaps(specs)                      # SpecError naming both, for a set of specs
    specs = shipped_specs()                     # every shipped spec, the set checked

Two specs of *different* splits overlap when they name the same release pair, when their release
ranges of one package overlap (``0.5.3 -> 0.5.5`` contains ``0.5.4 -> 0.5.5``'s change), or, for
SWE-bench instances, when they share the gold diff or the repository and base commit.  Within one
split, sharing is allowed (two bugs fixed by one release are two tasks).
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from swe_env.spec import SPECS_DIR, Spec, SpecError, load_spec


def _range(spec: Spec) -> tuple[Version, Version] | None:
    try:
        return Version(spec.old_version), Version(spec.new_version)
    except InvalidVersion:
        return None


def overlap(a: Spec, b: Spec) -> str:
    """Why ``a`` and ``b`` would leak one into the other ('' when they do not)."""
    if a.origin == "git" or b.origin == "git":
        if a.gold_patch and a.gold_patch.strip() == b.gold_patch.strip():
            return "the same gold diff"
        if a.origin == b.origin == "git" and a.repo_path == b.repo_path and a.base_commit == b.base_commit:
            return f"the same repository and base commit {a.base_commit[:12]}"
        return ""
    if a.package.lower() != b.package.lower():
        return ""
    if (a.old_version, a.new_version) == (b.old_version, b.new_version):
        return f"the same release pair {a.package} {a.old_version} -> {a.new_version}"
    ra, rb = _range(a), _range(b)
    if ra and rb and ra[0] < rb[1] and rb[0] < ra[1]:
        return (f"overlapping release ranges of {a.package} ({a.old_version} -> {a.new_version} and "
                f"{b.old_version} -> {b.new_version}): one's gold change contains the other's")
    return ""


def split_overlaps(spec: Spec, others: list[Spec]) -> list[str]:
    """One line per spec of another split that overlaps ``spec``, naming both."""
    return [f"{spec.id} ({spec.split}) and {other.id} ({other.split}) share {why}"
            for other in others if other.id != spec.id and other.split != spec.split
            and (why := overlap(spec, other))]


def refuse_overlaps(specs: list[Spec], where: str) -> None:
    """``SpecError`` naming both specs of the first cross-split overlap among ``specs``."""
    for i, spec in enumerate(specs):
        problems = split_overlaps(spec, specs[i + 1:])
        if problems:
            raise SpecError(f"{where}: a held-out task must share nothing with a training task: {problems[0]}; "
                            "move one of them to the other split or drop it")


_SHIPPED: dict[tuple, list[Spec]] = {}
"""The parsed specs by the folder's listing (name, size, mtime of each file): one probe asks for them some twenty
times, and parsing every YAML each time cost about 0.26 s of CPU per probe. An edited, added or removed spec file
changes the key, so it is read again."""


def shipped_specs() -> list[Spec]:
    """Every spec shipped in ``swe_env/specs/``, ordered by id; two with one id is an error."""
    paths = sorted(SPECS_DIR.glob("*.yaml"))
    key = tuple((p.name, (st := p.stat()).st_size, st.st_mtime_ns) for p in paths)
    if key not in _SHIPPED:
        specs = [load_spec(path) for path in paths]
        seen: dict[str, int] = {}
        for spec in specs:
            seen[spec.id] = seen.get(spec.id, 0) + 1
        duplicates = [task_id for task_id, count in seen.items() if count > 1]
        if duplicates:
            raise SpecError(f"{SPECS_DIR}: task ids used by more than one spec: {duplicates}")
        refuse_overlaps(specs, str(SPECS_DIR))
        _SHIPPED.clear()
        _SHIPPED[key] = sorted(specs, key=lambda s: s.id)
    return list(_SHIPPED[key])  # specs are frozen; the list is the caller's own
