"""swe_env: repository-level SWE tasks rebuilt from real releases, their images, and trusted grading.

Owns the task specs (``specs/*.yaml``), the builder that turns a spec into a *checked* task with
its own Docker image (``build``), the task API the other layers use (``tasks``) and the trusted
grader (``grade``).  It sits beside ``sandboxes`` (which it uses to run containers) and must never
import ``meta_agent``.  It never trusts a patch, a test run or anything a container wrote.

    from swe_env.tasks import shipped_tasks, gold_patch
    from swe_env.grade import grade
    task = shipped_tasks("train")[0]
    assert grade(task, gold_patch(task)).resolved
"""
