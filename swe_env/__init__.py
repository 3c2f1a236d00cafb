"""swe_env: repository-level SWE tasks rebuilt from real releases, their images, and trusted grading.

Owns the task specs (``specs/*.yaml``, read by ``spec``), the builder that turns a spec into a
*checked* task (``sdist``: the buggy repo and gold patch from two released sdists in the host
cache; ``task_image``: one Docker image per task, built offline FROM the sandbox image;
``build``: the check, three test runs each way, cached), SWE-bench imports over a local clone
(``swebench``), the task API the other layers use (``tasks``) and the trusted grader (``grade``,
with ``test_runner`` running inside the task container).  The agent environment, patch parsing
and trajectory importers (``agent_env``, ``patch_format``, ``imports``) belong to the SWE domain.
It sits beside ``sandboxes`` and must never import ``meta_agent``; it never trusts a patch, a
test run or anything a container wrote.

    python -m meta_agent tasks build --domain swe       # once (scripts/setup.sh does it)
    from swe_env.tasks import gold_patch
    from swe_env.checked import shipped_tasks
    from swe_env.grade import grade
    task = shipped_tasks("train")[0]
    assert grade(task, gold_patch(task)).resolved
"""
