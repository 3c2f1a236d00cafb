"""Identity checks of the runner's objects (runs inside the container; stdlib only).

    check = watch(modules=[...], classes_of=[...])   # a snapshot taken before untrusted code runs
    changed = check()                                # names whose object is no longer the same one

Module attributes raise no audit event, so a patch can rebind ``builtins.__build_class__`` or
``_pytest.runner.CallInfo`` silently; comparing every attribute's identity against the snapshot
(and every class attribute of the watched modules' classes) finds it.  The check's own helpers
are bound into its closure, so rebinding ``builtins.id`` or ``vars`` does not blind it.
"""


def watch(modules, *, strict_additions=(), mutable=frozenset()):
    """Snapshot ``vars()`` of ``modules`` and of every class they define; return the checker.

    A name added later to a module in ``strict_additions`` (``builtins``) counts as a change too:
    a new builtin shadows nothing, but no honest code under test adds one.
    """
    items, dict_, id_, type_, isinstance_, list_ = [], dict, id, type, isinstance, list
    for module in modules:
        items.append((module.__name__, module.__dict__, dict_(module.__dict__), module.__name__ in strict_additions))
        for name, value in list_(module.__dict__.items()):
            if isinstance_(value, type_) and getattr(value, "__module__", None) == module.__name__:
                items.append((f"{module.__name__}.{name}", value.__dict__, dict_(value.__dict__), False))

    def check():
        changed = []
        for label, live, snapshot, strict in items:
            for name, value in snapshot.items():
                if f"{label}.{name}" in mutable:
                    continue
                if name not in live or live[name] is not value:
                    changed.append(f"{label}.{name}")
            if strict and len(live) != len(snapshot):
                changed += [f"{label}.{name} (added)" for name in live if name not in snapshot]
        return changed

    return check
