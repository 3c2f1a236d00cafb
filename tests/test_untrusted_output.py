"""The host trusts nothing a sandbox leaves behind: real containers write hostile things into /out.

Each case is a real sandboxed command as ``nobody``; the host reads its output through
``sandboxes.untrusted`` and must refuse it with a reason, never hang, never read a host
file, never read without bound.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from sandboxes.base import Limits
from sandboxes.docker import DockerSandbox
from sandboxes.untrusted import UntrustedOutputError, parse_json, read_bytes, read_json

pytestmark = pytest.mark.docker


def py(code: str) -> list[str]:
    return ["python3", "-c", code]


def leave(docker_sandbox: DockerSandbox, out: Path, code: str, limits: Limits = Limits(timeout_s=30)):
    result = docker_sandbox.run(py(code), mounts=[], output_dir=out, limits=limits)
    return result


def read_in_thread(path: Path, max_bytes: int) -> tuple[object, BaseException | None]:
    """read_json in a thread, so that a read that would hang fails the test instead of the run."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = read_json(path, max_bytes)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), f"reading {path.name} hung"
    return box.get("value"), box.get("error")


def test_symlink_to_a_host_file_is_not_followed(docker_sandbox, tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text('{"secret": "host data"}')
    out = tmp_path / "out"
    # The container cannot see the host file, but a symlink resolves on the host, where the reader runs.
    result = leave(docker_sandbox, out, f"import os; os.symlink({str(secret)!r}, '/out/status.json')")
    assert result.ok, result.reason
    assert (out / "status.json").is_symlink()
    value, error = read_in_thread(out / "status.json", 1 << 20)
    assert value is None and isinstance(error, UntrustedOutputError)
    assert "symlink" in str(error)


def test_fifo_does_not_hang_the_host(docker_sandbox, tmp_path):
    out = tmp_path / "out"
    result = leave(docker_sandbox, out, "import os; os.mkfifo('/out/status.json')")
    assert result.ok, result.reason
    value, error = read_in_thread(out / "status.json", 1 << 20)
    assert isinstance(error, UntrustedOutputError) and "not a regular file" in str(error)


def test_symlink_to_dev_zero_is_not_read(docker_sandbox, tmp_path):
    out = tmp_path / "out"
    result = leave(docker_sandbox, out, "import os; os.symlink('/dev/zero', '/out/results.json')")
    assert result.ok, result.reason
    value, error = read_in_thread(out / "results.json", 1 << 20)
    assert isinstance(error, UntrustedOutputError) and "symlink" in str(error)


def test_oversized_and_malformed_files_are_refused(docker_sandbox, tmp_path):
    out = tmp_path / "out"
    code = ("open('/out/big.json','w').write('[' + '1,' * 600000 + '1]');"
            "open('/out/nan.json','w').write('{\"reward\": NaN}');"
            "open('/out/deep.json','w').write('[' * 100000 + ']' * 100000);"
            "open('/out/latin.json','wb').write(b'\\xff\\xfe')")
    result = leave(docker_sandbox, out, code)
    assert result.ok, result.reason
    for name, words in (("big.json", "over the limit"), ("nan.json", "not valid JSON"),
                        ("deep.json", "not valid JSON"), ("latin.json", "not UTF-8")):
        value, error = read_in_thread(out / name, 1 << 20)
        assert isinstance(error, UntrustedOutputError), name
        assert words in str(error), (name, str(error))


def test_a_well_formed_file_is_read(docker_sandbox, tmp_path):
    out = tmp_path / "out"
    result = leave(docker_sandbox, out, "open('/out/ok.json','w').write('{\"rewards\": [0.0, 1.0]}')")
    assert result.ok, result.reason
    assert read_json(out / "ok.json", 1024) == {"rewards": [0.0, 1.0]}
    assert read_bytes(out / "ok.json", 1024).startswith(b"{")


def test_out_is_capped_in_total_bytes(docker_sandbox, tmp_path):
    out = tmp_path / "out"
    # 200 files of 1 MB each, one every 20 ms: every one is under the per-file cap, together 200 MB in ~4 s.
    # The cap is enforced by polling (sandboxes.docker.OUTPUT_POLL_S), so a writer faster than a poll and a
    # kill overshoots by what it writes meanwhile; paced like this, stopping early is what the test can see.
    code = ("import time\n"
            "for i in range(200):\n"
            "    open(f'/out/f{i}', 'wb').write(b'x' * (1 << 20))\n"
            "    time.sleep(0.02)\n"
            "time.sleep(30)\n")
    result = leave(docker_sandbox, out, code, Limits(timeout_s=60, output_total_mb=16, output_mb=8))
    assert not result.ok
    assert result.output_exceeded and "16 MB" in result.output_exceeded
    written = sum(p.stat().st_size for p in out.iterdir())
    assert written < 200 << 20  # killed long before it wrote everything


def test_out_is_capped_in_files(docker_sandbox, tmp_path):
    out = tmp_path / "out"
    code = "import os, time\nfor i in range(100000):\n    open(f'/out/{i}', 'w').close()\ntime.sleep(30)\n"
    result = leave(docker_sandbox, out, code, Limits(timeout_s=60, output_files=200))
    assert not result.ok
    assert "more than 200 files" in result.output_exceeded
    assert len(os.listdir(out)) < 100000


def test_out_written_between_two_polls_is_named(docker_sandbox, tmp_path):
    """A burst that passes the cap and exits before the next poll is still a breach the result names."""
    out = tmp_path / "out"
    code = "import os\nfor i in range(300):\n    open(f'/out/{i}', 'w').close()\n"
    result = leave(docker_sandbox, out, code, Limits(timeout_s=60, output_files=200))
    assert not result.ok
    assert result.output_exceeded == "more than 200 files under /out"


def test_parse_json_refuses_constants():
    with pytest.raises(UntrustedOutputError):
        parse_json(b'[Infinity]', "answer")
    assert parse_json(b'{"a": 1e39}', "answer") == {"a": 1e39}  # finite in float64: the gate judges it
