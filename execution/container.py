"""Run a plan of untrusted commands in one capped container, behind the trusted parent.

    plan = Plan(runs=[["python3", "-I", "-B", "/grader/my_runner.py"]])
    result = run_plan(image, plan, mounts=[Mount(repo, "/repo")], inbox=[Path("my_runner.py")],
                      limits=Limits(timeout_s=120), on_record=print)
    result.records          # every record, in order, as the parent accepted it (each has "run")
    result.flags            # what the parent or the audit hook/identity checks flagged
    result.runs             # per run: {"exit": int|None, "done": bool}
    result.sandbox          # the SandboxResult: timed_out, oom_killed, stderr tail

The container is ``sandboxes.docker.DockerSandbox``'s (no network, user 65534, read-only root
and mounts, memory/CPU/pids/output/wall caps) running ``grader_parent.py`` as its first
process; ``inbox`` files and the ``execution/inbox`` modules are mounted read-only at
``/grader``.  Each run's argv is started by the parent with two extra arguments, the key fd and
the record fd, for ``grader_channel.open_channel``.  Records are read from the container's
stdout as it streams (``on_record`` sees each one as it arrives); a run killed by the wall
timeout still keeps every record sent before.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from execution.records import RecordParser
from sandboxes.base import Limits, Mount, SandboxResult

INBOX = Path(__file__).with_name("inbox")
GRADER_DIR = "/grader"


@dataclass(frozen=True)
class Plan:
    """Commands run one after another in the same container, each as its own process."""

    runs: list[list[str]]
    run_timeout_s: float = 600.0


@dataclass
class PlanResult:
    """What the trusted parent reported, parsed and bounded on the host."""

    records: list[dict]
    flags: list[dict]
    runs: list[dict]
    complete: bool
    """The parent printed its final ``end`` record: every run was started and finished."""
    problems: list[str]
    sandbox: SandboxResult

    @property
    def timed_out(self) -> bool:
        return self.sandbox.timed_out


def run_plan(image: str, plan: Plan, *, mounts: list[Mount], inbox: list[Path] = (), limits: Limits = Limits(),
             on_record: Callable[[dict], None] | None = None, files: dict[str, str] | None = None,
             supervised: bool = False) -> PlanResult:
    """Run ``plan`` in a fresh container of ``image``; never raises for what the commands do.

    ``supervised``: the runs are trusted supervisors that start untrusted code only under uids of its own (the
    code grader): the container starts as uid 0 with ``sandboxes.docker.SUPERVISOR_CAPS`` only."""
    from sandboxes.docker import DockerSandbox

    with tempfile.TemporaryDirectory(prefix="exec-plan-") as tmp:
        grader, out = Path(tmp) / "grader", Path(tmp) / "out"
        grader.mkdir()
        Path(tmp).chmod(0o755)
        grader.chmod(0o755)
        for source in [*INBOX.glob("grader_*.py"), *map(Path, inbox)]:
            shutil.copyfile(source, grader / source.name)
        for name, text in (files or {}).items():
            (grader / name).write_text(text)
        (grader / "plan.json").write_text(json.dumps({"runs": [{"argv": argv} for argv in plan.runs],
                                                       "run_timeout_s": plan.run_timeout_s}))
        if supervised:  # the supervisor (uid 0, DAC_OVERRIDE) reads them; no program's uid can, landlock or not
            for path in grader.iterdir():
                path.chmod(0o600)
            grader.chmod(0o700)
        parser = RecordParser()
        process = DockerSandbox(image).start(
            ["python3", "-I", "-B", f"{GRADER_DIR}/grader_parent.py", f"{GRADER_DIR}/plan.json"],
            mounts=[*mounts, Mount(grader, GRADER_DIR)], output_dir=out, limits=limits, supervised=supervised)
        reader = threading.Thread(target=_follow, args=(process.container, parser, on_record), daemon=True)
        try:
            reader.start()
            process.wait()
            reader.join(timeout=10)  # the stream ends with the container; give it time to drain
        finally:
            sandbox = process.stop()
        if reader.is_alive():  # the log stream did not end: fall back to the logs the sandbox kept
            parser = RecordParser()
            parser.feed(sandbox.stdout.encode())
        parser.close()
    records = [r for r in parser.records if r["k"] not in ("run_start", "run_end", "end")]
    return PlanResult(
        records=records, flags=[r for r in records if r["k"] == "flag"],
        runs=[r for r in parser.records if r["k"] == "run_end"],
        complete=any(r["k"] == "end" for r in parser.records), problems=parser.problems, sandbox=sandbox)


def _follow(container, parser: RecordParser, on_record: Callable[[dict], None] | None) -> None:
    """Feed the container's stdout to ``parser`` as it streams, until the container ends."""
    try:
        for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=False):
            for record in parser.feed(chunk):
                if on_record is not None:
                    on_record(record)
    except Exception:  # noqa: BLE001 - the container was removed under us: what arrived is kept
        return
