"""Agent mode's environment: one bash episode in a fresh container of the task image.

The container has no network, a read-only root filesystem, no capabilities and a pids and
memory limit.  The buggy repo stays untouched at ``REPO_DIR``; the agent works on a copy in
``WORK_DIR`` (a size-capped tmpfs) as an unprivileged user, one command per step:

- each command runs under ``timeout -s KILL`` with ``limits.command_timeout_s`` (never past the
  episode's wall time), its output captured in the container and cut to ``limits.output_chars``;
- after each command every process of the agent's user is killed: nothing left running in the
  background can change the repo after the patch is taken;
- ``submit`` (alone on its command line) ends the episode; so do ``max_steps`` and ``wall_time_s``.

At the end trusted host code copies the work tree out (bounded tar stream), diffs it against
the original tree, removes the container and grades the diff with ``swe_env.grade.grade``.
Containers are always removed, also on exceptions and Ctrl-C (``close`` in ``finally``), and
the episode holds one ``ContainerCap`` slot while its container lives.

    env = BashEnvironment(load_task("sqlparse-0.5.5-begin-transaction"), AgentLimits(max_steps=10))
    try:
        print(env.start())                       # the task statement
        obs = env.step("grep -n BEGIN sqlparse/engine/statement_splitter.py")
        obs = env.step("submit")                 # obs.done
        outcome = env.result()                   # exit_status, patch, verified, verifier_info
    finally:
        env.close()
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass

from swe_env.feedback import execution_feedback
from swe_env.patch_format import unified_diff
from swe_env.tasks import SweTask
from trajectory.observation import Observation

REPO_DIR = "/repo"
WORK_DIR = "/work"
AGENT_USER = "65534:65534"
SUBMIT = "submit"
EXIT_MARK = "__META_AGENT_EXIT__"
MAX_TREE_BYTES = 64 << 20
"""The work tree copied back out is cut off here; a repo grown past it is not a patch anyone wants."""
MAX_FILE_BYTES = 1 << 20
SKIP_PARTS = ("__pycache__", ".pytest_cache", ".mypy_cache", ".eggs")
SKIP_SUFFIXES = (".pyc", ".pyo", ".so", ".egg-info")
EXEC_GRACE_S = 30.0
"""A docker exec still running this long past its command's timeout means the container is stuck: it is removed."""
LABEL = "meta_agent.swe_agent"


@dataclass(frozen=True)
class AgentLimits:
    """Bounds of one agent episode."""

    max_steps: int = 30
    wall_time_s: float = 600
    output_chars: int = 10_000
    """Bytes of one command's output shown to the policy; the rest is cut, and the cut is said."""
    command_timeout_s: float = 60
    memory_mb: int = 2048
    pids: int = 256
    work_mb: int = 512
    """Size of the tmpfs holding the agent's copy of the repo."""


def task_statement(task: SweTask) -> str:
    """The first user turn of an episode of ``task`` (the probe session builds agent rows with it too)."""
    return (f"{task.problem_statement.strip()}\n\nThe repository is at {WORK_DIR}/repo (your working "
            f"directory). Run one bash command per turn. When the fix is done, run `{SUBMIT}`.")


class BashEnvironment:
    """One trajectory's container (``trajectory.observation.ToolEnvironment``)."""

    def __init__(self, task: SweTask, limits: AgentLimits = AgentLimits()) -> None:
        self.task, self.limits = task, limits
        self.actions: list[str] = []
        self.exit_status: str | None = None
        self.patch = ""
        self.patch_error = ""
        self._container = None
        self._slot = contextlib.ExitStack()
        self._started_at = 0.0
        self._original: dict[str, str] = {}
        self._result: dict | None = None

    # -- the episode --------------------------------------------------------------------------

    def start(self) -> str:
        """Create the container, copy the repo into the work tree; the task statement for the policy."""
        from sandboxes.docker_engine import connect_engine, owner_labels, sweep_once
        from swe_env.grade import ContainerCap
        from swe_env.tasks import ensure_image

        image = ensure_image(self.task, log=lambda _: None)
        self._slot.enter_context(ContainerCap.slot())
        client = connect_engine()
        sweep_once(client)  # what a killed controller left running (its containers carry the same owner labels)
        try:
            self._container = client.containers.run(
                image, ["sleep", "infinity"], detach=True, name=f"meta-agent-swe-{uuid.uuid4().hex[:12]}",
                labels=owner_labels() | {LABEL: "1"},
                user=AGENT_USER, network_mode="none", read_only=True, cap_drop=["ALL"],
                security_opt=["no-new-privileges"], mem_limit=f"{self.limits.memory_mb}m",
                memswap_limit=f"{self.limits.memory_mb}m", pids_limit=self.limits.pids, nano_cpus=int(1e9),
                tmpfs={"/tmp": "size=64m,mode=1777", WORK_DIR: f"size={self.limits.work_mb}m,mode=1777,exec"},
                environment={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "PAGER": "cat"},
                working_dir="/tmp")
            self._original = self._tree(REPO_DIR)
            copy = self._exec(["cp", "-r", REPO_DIR, f"{WORK_DIR}/repo"], timeout_s=120)
            if copy[0] != 0:
                raise RuntimeError(f"copying the repo into the work tree failed: {copy[1][-500:]}")
        except BaseException:
            self.close()
            raise
        self._started_at = time.monotonic()
        return task_statement(self.task)

    def step(self, action: str) -> Observation:
        """Run one bash command (or ``submit``); the episode ends on submit or a limit."""
        if self.exit_status is not None:
            raise RuntimeError(f"the episode has ended ({self.exit_status}); start a new environment")
        self.actions.append(action)
        if action.strip() == SUBMIT:
            return self._end("submitted", "submitted")
        left = self.limits.wall_time_s - (time.monotonic() - self._started_at)
        if left <= 0:
            return self._end("time_limit", f"wall time limit of {self.limits.wall_time_s:.0f}s reached")
        timeout = max(1.0, min(self.limits.command_timeout_s, left))
        code, output, total = self._run_command(action, timeout)
        truncated = total > self.limits.output_chars
        if truncated:
            output += f"\n[output cut: {total} bytes, showing the first {self.limits.output_chars}]"
        if code == 137:
            output += f"\n[killed: exit 137 (command timeout {timeout:.0f}s, memory or a kill)]"
        if len(self.actions) >= self.limits.max_steps:
            self._finish("step_limit")
            return Observation(output + f"\n[step limit of {self.limits.max_steps} reached]", code, truncated, True)
        if time.monotonic() - self._started_at >= self.limits.wall_time_s:
            self._finish("time_limit")
            return Observation(output + "\n[wall time limit reached]", code, truncated, True)
        return Observation(output, code, truncated, False)

    def end(self, exit_status: str) -> None:
        """End the episode from outside (the policy's format errors, an endpoint failure); its patch is still graded."""
        if self.exit_status is None:
            self._finish(exit_status)

    def result(self) -> dict:
        """``exit_status``, ``patch``, ``verified`` (1.0 resolved, else 0.0) and ``verifier_info``; grades once."""
        if self.exit_status is None:
            raise RuntimeError("the episode is still running: step() until done, or end() it")
        if self._result is None:
            self.close()  # the grader starts its own container: never hold two slots
            from swe_env.grade import grade

            info = grade(self.task, self.patch).to_info() | {"patch": self.patch, "parse_status": "ok"}
            if self.patch_error:
                info["patch_error"] = self.patch_error
            info["execution"] = execution_feedback(info, exit_status=self.exit_status, actions=self.actions,
                                                   steps=len(self.actions))
            self._result = {"exit_status": self.exit_status, "patch": self.patch,
                            "verified": 1.0 if info.get("resolved") is True else 0.0, "verifier_info": info}
        return self._result

    def close(self) -> None:
        """Remove the container and give its slot back; safe to call twice."""
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True)
        self._slot.close()

    # -- inside the container -----------------------------------------------------------------

    def _end(self, exit_status: str, text: str) -> Observation:
        self._finish(exit_status)
        return Observation(text, 0, False, True)

    def _finish(self, exit_status: str) -> None:
        self.exit_status = exit_status
        try:
            if self._container is not None:
                self._kill_agent_processes()
                self.patch = unified_diff(self._original, self._tree(f"{WORK_DIR}/repo"))
        except RuntimeError as exc:  # a repo grown past the limit, or not readable: no patch, and why
            self.patch_error = str(exc)[:500]
        finally:
            self.close()

    def _run_command(self, command: str, timeout: float) -> tuple[int, str, int]:
        """(exit code, output cut to the limit, full output size in bytes); the output stays in the container."""
        n = self.limits.output_chars
        script = (f'timeout -s KILL {timeout:.0f} bash -c "$1" </dev/null >/tmp/.obs 2>&1; rc=$?; '
                  f'size=$(wc -c </tmp/.obs); head -c {n} /tmp/.obs; rm -f /tmp/.obs; '
                  f'printf "\\n{EXIT_MARK} %s %s\\n" "$rc" "$size"')
        code, output = self._exec(["bash", "-c", script, "bash", command], timeout_s=timeout + EXEC_GRACE_S,
                                  workdir=f"{WORK_DIR}/repo")
        self._kill_agent_processes()
        body, _, mark = output.rstrip("\n").rpartition("\n")
        fields = mark.split()
        if len(fields) == 3 and fields[0] == EXIT_MARK and fields[1].isdigit() and fields[2].isdigit():
            return int(fields[1]), body, int(fields[2])
        return code if code is not None else -1, output[:n], len(output)  # the command killed its own wrapper

    def _kill_agent_processes(self) -> None:
        # Every process in the container runs as the agent's user; all but the container's init
        # (pid 1) and this shell are killed, so nothing started in the background outlives its step.
        self._exec(["bash", "-c", "for p in /proc/[0-9]*; do id=${p#/proc/}; [ $id = 1 ] || [ $id = $$ ] || "
                                  "kill -9 $id 2>/dev/null; done; true"], timeout_s=30)

    def _exec(self, argv: list[str], timeout_s: float, workdir: str = "/tmp") -> tuple[int | None, str]:
        """Run ``argv`` in the container as the agent's user; a call stuck past ``timeout_s`` removes the container."""
        container = self._container
        if container is None:
            raise RuntimeError("the container is gone")
        box: dict = {}

        def call() -> None:
            try:
                box["result"] = container.exec_run(argv, user=AGENT_USER, workdir=workdir, demux=False)
            except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
                box["error"] = exc

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        thread.join(timeout_s)
        if thread.is_alive():
            self.close()
            raise TimeoutError(f"a command in the task container did not return within {timeout_s:.0f}s; "
                               "the container was removed")
        if "error" in box:
            raise box["error"]
        code, output = box["result"]
        return code, (output or b"").decode("utf-8", "replace")

    def _tree(self, root: str) -> dict[str, str]:
        """Path -> text of the text files under ``root`` in the container, read through a bounded tar stream.

        ``tar`` runs in the container (the engine cannot copy out of a tmpfs); the host reads at most
        ``MAX_TREE_BYTES`` of its output and parses it: nothing the agent wrote is trusted to be a valid archive.
        """
        parent, name = root.rsplit("/", 1)
        data = self._exec_bytes(["tar", "-C", parent or "/", "-cf", "-", name], timeout_s=120)
        files: dict[str, str] = {}
        try:
            tar = tarfile.open(fileobj=io.BytesIO(data))
        except tarfile.TarError as exc:
            raise RuntimeError(f"could not read the repo under {root}: {exc}") from exc
        with tar:
            for member in tar:
                if not member.isfile() or member.size > MAX_FILE_BYTES:
                    continue
                rel = member.name.split("/", 1)[1] if "/" in member.name else ""
                parts = rel.split("/")
                if not rel or any(p in SKIP_PARTS or p.endswith(".egg-info") for p in parts) \
                        or rel.endswith(SKIP_SUFFIXES):
                    continue
                try:
                    files[rel] = tar.extractfile(member).read().decode("utf-8")
                except UnicodeDecodeError:
                    continue  # binary files are not part of a source patch
        return files

    def _exec_bytes(self, argv: list[str], timeout_s: float) -> bytes:
        """Stdout of ``argv`` in the container, at most ``MAX_TREE_BYTES`` (more is an error), within ``timeout_s``."""
        container = self._container
        box: dict = {}

        def call() -> None:
            try:
                _, stream = container.exec_run(argv, user=AGENT_USER, stream=True, demux=True)
                data = bytearray()
                for out, _err in stream:
                    data += out or b""
                    if len(data) > MAX_TREE_BYTES:
                        raise RuntimeError(f"the repo is larger than {MAX_TREE_BYTES >> 20} MiB")
                box["data"] = bytes(data)
            except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
                box["error"] = exc

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        thread.join(timeout_s)
        if thread.is_alive():
            self.close()
            raise TimeoutError(f"reading the repo out of the task container took over {timeout_s:.0f}s")
        if "error" in box:
            raise box["error"]
        return box["data"]
