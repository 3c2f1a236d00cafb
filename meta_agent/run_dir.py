"""The run directory (DESIGN §4) and its persisted state.

    runs/<name>/
      run.json        the run's configuration (written once, at creation)
      state.json      round and phase; replaced atomically after every phase
      .lock           held by the one controller working on this run
      .draw-secret    the secret that seeds training's task draw (mode 0600; never in run.json, the harness or a
                      sandbox: an agent cannot compute the next round's tasks; a resume reads it back)
      harness/        the harness repo (or run.json names an existing one)
      archive/        the trajectory archive (Parquet)
      rounds/<n>/     job logs, metrics, digest, backtests, agent transcripts
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from meta_agent.errors import UserError


class RunLocked(UserError):
    """Another controller holds this run directory."""


class RunDirError(UserError):
    """The folder is not a run, or its ``run.json`` cannot be used; the message says what to do."""


def not_a_run_message(path: Path) -> str:
    """The one message every command gives for a folder that holds no run: names it and how to make one."""
    if Path(path).exists() and not Path(path).is_dir():
        return f"{path} is a file, not a run folder; give the run's folder as --run-dir"
    what = "does not exist" if not Path(path).exists() else "holds no run (no run.json)"
    return (f"{path} {what}; a run folder is made by `python -m meta_agent --domain math --run-dir {path}` "
            f"(or `python -m meta_agent demo --run-dir {path}` for a sample run without training)")


class RunStateError(RunDirError):
    """``state.json`` cannot be used; the message names the file and what to do."""


def write_json_atomic(path: Path, data) -> None:
    """Write-then-rename, with fsync, so a crash leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        json.dump(data, f, indent=2, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass(frozen=True)
class RunDir:
    path: Path
    """Made absolute, so that a path handed on (to git in another folder, to a container) names the same place."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path).absolute())

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def state_json(self) -> Path:
        return self.path / "state.json"

    @property
    def archive(self) -> Path:
        return self.path / "archive"

    @property
    def harness(self) -> Path:
        config = self.config() if self.run_json.exists() else {}
        return Path(config["harness_path"]) if config.get("harness_path") else self.path / "harness"

    @property
    def backtests(self) -> Path:
        return self.path / "backtests"

    def round_dir(self, n: int) -> Path:
        return self.path / "rounds" / str(n)

    def exists(self) -> bool:
        return self.run_json.exists()

    def config(self) -> dict:
        """``run.json`` as saved; ``RunDirError`` naming the file if it is missing or unusable."""
        try:
            config = json.loads(self.run_json.read_text())
        except (FileNotFoundError, NotADirectoryError):  # no folder, or a file where the folder belongs
            raise RunDirError(not_a_run_message(self.path)) from None
        except (ValueError, OSError) as exc:
            raise RunDirError(f"{self.run_json} is unreadable ({exc}); it is written once when the run starts, so it "
                              "was changed by hand or by another program: restore it from a backup") from None
        if not isinstance(config, dict):
            raise RunDirError(f"{self.run_json} holds a {type(config).__name__}, not the run's configuration; "
                              "restore it from a backup")
        return config

    def require(self) -> "RunDir":
        """This run folder, checked for a readable ``run.json`` and a harness repo; ``RunDirError`` otherwise."""
        self.config()
        harness = self.harness
        if not (harness / ".git").is_dir():
            raise RunDirError(f"{self.path} holds a run.json but its harness repo {harness} is missing; restore "
                              f"that folder from a backup, or start a new run with `python -m meta_agent --domain "
                              f"math --run-dir <new folder>`")
        return self

    def state(self) -> dict:
        """The saved round and phase ({} before the first save); ``RunStateError`` if the file is unusable."""
        if not self.state_json.exists():
            return {}
        try:
            state = json.loads(self.state_json.read_text())
        except (ValueError, OSError) as exc:
            raise RunStateError(f"{self.state_json} is unreadable ({exc}); it is written atomically, so it was changed "
                                "by hand or by another program: restore it from a backup, or move it away to restart "
                                "the run's bookkeeping from round 0 (the archive and the harness repo are kept)"
                                ) from None
        if not isinstance(state, dict):
            raise RunStateError(f"{self.state_json} holds a {type(state).__name__}, not the run's state object; "
                                "restore it from a backup or move it away")
        return state

    def save_state(self, state: dict) -> None:
        write_json_atomic(self.state_json, state)

    def lock(self) -> "RunLock":
        return RunLock(self.path / ".lock")

    @property
    def draw_secret_file(self) -> Path:
        return self.path / ".draw-secret"

    def draw_secret(self) -> bytes:
        """The run's secret for training's task draw, made on first use and read back ever after (a resume draws
        exactly what the first attempt drew).  Made whole or not at all: written to a private temporary file and
        linked into place, so a crash never leaves half a secret and two writers never replace one."""
        target = self.draw_secret_file
        if not target.exists():
            self.path.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".draw-secret.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, secrets.token_hex(32).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, target)
            except FileExistsError:
                pass  # another writer's secret is the run's
            finally:
                tmp.unlink()
        secret = target.read_bytes().strip()
        if len(secret) != 64:
            raise RunDirError(f"{target} holds {len(secret)} bytes, not the run's 64-character draw secret; it is "
                              "written once and never changed: restore it from a backup (without it a resume cannot "
                              "draw the tasks the run drew)")
        return secret


class RunLock:
    """An exclusive flock on the run directory; released by the OS if the controller dies."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def __enter__(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunLocked(f"{self.path.parent} is in use by controller pid {holder}; "
                            "wait for it to finish or stop it first") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
