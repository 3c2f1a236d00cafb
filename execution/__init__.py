"""The shared execution layer for graders that run untrusted code (SWE tests, code-domain programs).

Untrusted code runs in a capped container (``sandboxes.docker``: no network, user 65534,
read-only root and inputs, memory/CPU/pids/output caps, wall timeout).  Its verdict is never a
file the untrusted process writes at the end: a *trusted parent* (``inbox/grader_parent.py``,
the container's first process, non-dumpable, never importing untrusted code) starts each run
and receives its outcome records one by one, as they happen, over a pipe only it reads; each
record is MAC'd under a key that ratchets after every record, so a record cannot be forged,
replaced or dropped unnoticed.  The parent prints what it accepted on stdout, which only it can
write; the host parses that stream strictly and bounded (``execution.records``).

API (host side):

    from execution.container import Plan, run_plan
    result = run_plan(image, Plan(runs=[["python3", "-I", "-B", "/grader/runner.py", ...]]),
                      mounts=[Mount(src, "/repo")], inbox=[Path("runner.py")], limits=Limits(timeout_s=60),
                      on_record=callback)               # records streamed as they arrive
    result.records, result.flags, result.runs, result.complete, result.sandbox

In the container (stdlib only; the inbox modules are at ``/grader``, put it on ``sys.path``
with ``python3 -I``), a runner's first lines, before any untrusted code is imported:

    send = grader_channel.open_channel(int(sys.argv[-2]), int(sys.argv[-1]))
    check = grader_identity.watch([...trusted modules...], strict_additions=("builtins",))
    grader_audit.close_proc()                # non-dumpable: /proc/self/mem and fd become root's
    grader_audit.install(send, roots=("/repo",), protected=("_pytest", "pytest", "pluggy", "grader_"))
    send("test", node=..., outcome=...)     # one record per outcome, when it happens
    send("flag", layer="identity", why=...) # when check() returns names
    send("done")                            # last; anything after it is a channel flag

``execution.canaries`` writes tests under unguessable names that must pass or must fail; ``execution.twins``
mutation twins of the deciding tests in their own files; ``execution.second_verdict`` picks the deciding tests a
runner that is not pytest (``inbox/grader_plain.py``) can run again in a fresh process.
What each layer stops, and what remains possible: ``execution/README.md``.
"""
