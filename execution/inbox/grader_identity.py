"""Identity checks of the runner's objects (runs inside the container; stdlib only).

    check = watch(modules=[...], classes_of=[...])   # a snapshot taken before untrusted code runs
    changed = check()                                # names whose object is no longer the same one

Module attributes raise no audit event, so a patch can rebind ``builtins.__build_class__`` or
``_pytest.runner.CallInfo`` silently; comparing every attribute's identity against the snapshot
(and every class attribute of the watched modules' classes) finds it.  The check's own helpers
are bound into its closure, so rebinding ``builtins.id`` or ``vars`` does not blind it.
"""


def watch(modules, *, strict_additions=(), mutable=frozenset(), strict_classes=False):
    """Snapshot ``vars()`` of ``modules`` and of every class they define; return the checker.

    A name added later to a module in ``strict_additions`` (``builtins``) counts as a change too:
    a new builtin shadows nothing, but no honest code under test adds one.  With ``strict_classes``,
    so does a name added to a class: ``Function.obj`` set over the property ``Function`` inherits
    changes what every test runs without rebinding anything that was there.
    """
    import operator

    items, type_, isinstance_, list_, all_, map_, is_ = [], type, isinstance, list, all, map, operator.is_

    def add(label, live, strict):
        names = tuple(n for n in live if f"{label}.{n}" not in mutable)
        items.append((label, live, names, tuple(live[n] for n in names), len(live), strict))

    for module in modules:
        add(module.__name__, module.__dict__, module.__name__ in strict_additions)
        for name, value in list_(module.__dict__.items()):
            if isinstance_(value, type_) and getattr(value, "__module__", None) == module.__name__:
                add(f"{module.__name__}.{name}", value.__dict__, strict_classes)

    def check():
        changed = []
        for label, live, names, values, size, strict in items:
            if all_(map_(is_, map_(live.get, names), values)) and not (strict and len(live) != size):
                continue  # the fast path: C-speed identity comparison of the whole namespace
            changed += [f"{label}.{n}" for n, v in zip(names, values) if live.get(n) is not v]
            if strict:
                changed += [f"{label}.{n} (added)" for n in list_(live) if n not in names
                            and f"{label}.{n}" not in mutable and f"*.{n}" not in mutable]
        return changed

    def settle(accept):
        """Take into the snapshot the names added since it whose value ``accept`` trusts; return the others.

        pytest's own plugins add attributes to its classes when they configure (``_pytest.legacypath``
        sets ``Config.rootdir``, ``Node.fspath``...): called once configuration is over, this accepts
        what pytest's files added and names (and keeps flagging) anything else.
        """
        others = []
        for index, (label, live, names, values, size, strict) in enumerate(items):
            if not strict or len(live) == size:
                continue
            new = [n for n in list_(live) if n not in names and f"{label}.{n}" not in mutable
                   and f"*.{n}" not in mutable]
            taken = tuple(n for n in new if accept(live[n]))
            others += [f"{label}.{n} (added)" for n in new if n not in taken]
            items[index] = (label, live, names + taken, values + tuple(live[n] for n in taken), size + len(taken),
                            strict)
        return others

    check.settle = settle
    return check
