"""The sandbox image: its recipe, and a build that needs no container registry.

The image is a minimal Debian with ``python3`` and the few packages harness code
may import (``SANDBOX_PACKAGES`` under ``/opt/site``).  Its tag is a short hash of
the recipe, so changing the recipe makes a new image and never silently reuses
an old one.

Runbook, offline (a machine that reaches only package registries; as root)::

    bash scripts/start_docker.sh        # installs docker.io + debootstrap if missing, starts dockerd
    python -m sandboxes.image build     # ~1 min the first time (debootstrap), seconds after; idempotent
    python -m sandboxes.image status    # image name, present or not, cached rootfs

The offline build runs ``debootstrap --variant=minbase --include=python3 bookworm``
once (the rootfs tarball is cached under ``~/.cache/meta_agent/``), installs the
packages into ``/opt/site`` with the host's pip (for Python 3.11 and bookworm's
glibc, whatever the host's own Python is), and ``docker import``s the tree.

With a registry, build the same contents from ``DOCKERFILE`` instead::

    python -m sandboxes.image dockerfile | docker build -t "$(python -m sandboxes.image name)" -

Either way ``DEFAULT_IMAGE`` names the result, and ``sandboxes.docker.DockerSandbox``
uses it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

IMAGE_NAME = "meta-agent-sandbox"
DEBIAN_SUITE = "bookworm"
CONTAINER_PYTHON = "3.11"
"""The suite's python3; wheels are chosen for it, not for the host's Python."""
CONTAINER_GLIBC_MINOR = 36
"""bookworm's glibc is 2.36: no wheel built for a newer one may enter the image."""
SANDBOX_PACKAGES = ("pyyaml==6.0.3", "jinja2==3.1.6", "math-verify==0.9.0")
"""What harness code may import besides the standard library (pinned: the tag names the content)."""
RECIPE_REVISION = 1
"""Bump when a build step changes the image contents without changing the lists above."""
SITE_DIR = "/opt/site"
DEBIAN_MIRROR = os.environ.get("META_AGENT_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BUILD_HINT = "python -m sandboxes.image build"


def recipe_tag() -> str:
    """A short hash of everything that decides the image contents."""
    recipe = {
        "suite": DEBIAN_SUITE,
        "python": CONTAINER_PYTHON,
        "glibc": CONTAINER_GLIBC_MINOR,
        "packages": list(SANDBOX_PACKAGES),
        "site": SITE_DIR,
        "revision": RECIPE_REVISION,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


DEFAULT_IMAGE = f"{IMAGE_NAME}:{recipe_tag()}"
"""The image ``DockerSandbox`` runs by default: ``meta-agent-sandbox:<recipe hash>``."""

IMAGE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONPATH": SITE_DIR,
    "PYTHONDONTWRITEBYTECODE": "1",
    "LANG": "C.UTF-8",
}

DOCKERFILE = f"""\
# The sandbox image for machines that can pull from a registry (same contents as the offline build).
FROM python:{CONTAINER_PYTHON}-slim-{DEBIAN_SUITE}
RUN pip install --no-cache-dir --target {SITE_DIR} {' '.join(SANDBOX_PACKAGES)}
ENV PYTHONPATH={SITE_DIR} PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8
LABEL meta_agent.recipe={recipe_tag()}
WORKDIR /tmp
CMD ["python3"]
"""

Log = Callable[[str], None]


def _log(message: str) -> None:
    print(f"[sandbox image] {message}", flush=True)


def cache_dir() -> Path:
    """Where the debootstrapped rootfs tarball is kept between builds."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "meta_agent"


def _debian_arch() -> str:
    machine = platform.machine()
    arches = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
    if machine not in arches:
        raise RuntimeError(f"no Debian architecture known for machine {machine!r}; use DOCKERFILE instead")
    return arches[machine]


def rootfs_tarball_path() -> Path:
    """The cached rootfs tarball for this suite and architecture."""
    return cache_dir() / f"rootfs-{DEBIAN_SUITE}-{_debian_arch()}-minbase-python3.tar"


def _run(argv: list[str], what: str) -> None:
    """Run a build step; on failure raise with its output tail so the cause is visible."""
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n{tail}")


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve()) + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    return [p for p in points if p.startswith(prefix)]


def _remove_rootfs(path: Path) -> None:
    """Delete a half-built rootfs, refusing while anything is mounted inside it.

    A failed debootstrap can leave /proc or a bind-mounted /dev in the target;
    deleting through such a mount would damage the host.
    """
    for point in sorted(_mounts_under(path), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
    left = _mounts_under(path)
    if left:
        raise RuntimeError(f"not deleting {path}: still mounted inside: {left}; unmount them and delete it by hand")
    shutil.rmtree(path)


def cached_rootfs(*, log: Log = _log) -> Path:
    """Return the rootfs tarball, running debootstrap first if it is not cached yet."""
    tarball = rootfs_tarball_path()
    if tarball.exists():
        log(f"using cached rootfs {tarball}")
        return tarball
    if shutil.which("debootstrap") is None:
        raise RuntimeError(
            "debootstrap is not installed; as root run `apt-get install -y debootstrap` "
            "(or `bash scripts/start_docker.sh`), or build from DOCKERFILE on a machine with a registry"
        )
    if os.geteuid() != 0:
        raise RuntimeError("debootstrap needs root: run `sudo python -m sandboxes.image build`")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=tarball.parent))
    try:
        log(f"debootstrap {DEBIAN_SUITE} (minbase + python3) from {DEBIAN_MIRROR}; takes about a minute")
        _run(
            ["debootstrap", "--variant=minbase", "--include=python3", f"--arch={_debian_arch()}",
             DEBIAN_SUITE, str(work), DEBIAN_MIRROR],
            "debootstrap",
        )
        # Downloaded .debs and package lists are dead weight in a container without apt access.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (work / junk).glob("*"):
                if item.is_file():
                    item.unlink()
        log(f"caching rootfs as {tarball}")
        partial = tarball.with_suffix(".part")
        _run(["tar", "--numeric-owner", "-C", str(work), "-cf", str(partial), "."], "tar rootfs")
        partial.rename(tarball)
    finally:
        _remove_rootfs(work)
    return tarball


def platform_args() -> list[str]:
    """pip's ``--platform`` arguments for the sandbox's glibc and every older manylinux tag.

    Older pips do not widen ``--platform manylinux_2_36`` to older glibcs, so each one is named.
    """
    machine = platform.machine()
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(CONTAINER_GLIBC_MINOR, 16, -1)]
    tags.append(f"manylinux2014_{machine}")
    return [arg for tag in tags for arg in ("--platform", tag)]


def _pip_install_site(root: Path, log: Log) -> None:
    """Install SANDBOX_PACKAGES into ROOT/opt/site as wheels for the container's Python and glibc."""
    log(f"pip install {' '.join(SANDBOX_PACKAGES)} -> {SITE_DIR}")
    _run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-cache-dir",
         "--target", str(root / SITE_DIR.lstrip("/")),
         "--only-binary=:all:", "--implementation", "cp",
         "--python-version", CONTAINER_PYTHON,
         *platform_args(), *SANDBOX_PACKAGES],
        "pip install into the image",
    )


def image_exists(client: docker.DockerClient, name: str = DEFAULT_IMAGE) -> bool:
    """Whether the engine behind ``client`` has image ``name``."""
    import docker.errors

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_image(client: docker.DockerClient, *, force: bool = False, log: Log = _log) -> str:
    """Build ``DEFAULT_IMAGE`` offline unless it already exists; return its name.

        from sandboxes.docker_engine import connect_engine
        build_image(connect_engine())        # no-op when the image is there
    """
    previous = client.images.get(DEFAULT_IMAGE).id if image_exists(client) else None
    if previous and not force:
        log(f"{DEFAULT_IMAGE} already present")
        return DEFAULT_IMAGE
    tarball = cached_rootfs(log=log)
    with tempfile.TemporaryDirectory(prefix="image-", dir=tarball.parent) as tmp:
        root = Path(tmp) / "rootfs"
        root.mkdir()
        _run(["tar", "--numeric-owner", "-C", str(root), "-xf", str(tarball)], "unpack cached rootfs")
        _pip_install_site(root, log)
        log(f"docker import -> {DEFAULT_IMAGE}")
        changes = [f"ENV {key}={value}" for key, value in IMAGE_ENV.items()]
        changes += [f"LABEL meta_agent.recipe={recipe_tag()}", "WORKDIR /tmp", 'CMD ["python3"]']
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        try:
            answer = client.api.import_image(
                src=tar.stdout, stream_src=True, repository=IMAGE_NAME, tag=recipe_tag(), changes=changes
            )
        finally:
            tar.stdout.close()
            tar_rc = tar.wait()
        if tar_rc != 0 or "error" in str(answer).lower() or not image_exists(client):
            raise RuntimeError(f"docker import of {DEFAULT_IMAGE} failed (tar exit {tar_rc}): {answer}")
    if previous and previous != client.images.get(DEFAULT_IMAGE).id:
        _remove_replaced_image(client, previous, log)
    log(f"built {DEFAULT_IMAGE}")
    return DEFAULT_IMAGE


def _remove_replaced_image(client: docker.DockerClient, image_id: str, log: Log) -> None:
    """Drop the image a forced rebuild untagged, unless a container still uses it."""
    import docker.errors

    try:
        client.images.remove(image_id)
    except docker.errors.APIError as exc:
        log(f"kept the replaced image {image_id[:19]}: {exc.explanation}")


def main(argv: list[str] | None = None) -> int:
    """CLI: ``build [--force]``, ``status``, ``name``, ``dockerfile``."""
    parser = argparse.ArgumentParser(prog="python -m sandboxes.image", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    build = sub.add_parser("build", help="build the sandbox image offline (skipped if it exists)")
    build.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    sub.add_parser("status", help="show the image name and whether it and the cached rootfs exist")
    sub.add_parser("name", help="print the image name (name:tag)")
    sub.add_parser("dockerfile", help="print the Dockerfile for machines with a registry")
    args = parser.parse_args(argv)

    if args.cmd == "name":
        print(DEFAULT_IMAGE)
        return 0
    if args.cmd == "dockerfile":
        print(DOCKERFILE, end="")
        return 0

    from sandboxes.base import SandboxUnavailable
    from sandboxes.docker_engine import connect_engine

    try:
        client = connect_engine()
    except SandboxUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.cmd == "build":
        try:
            build_image(client, force=args.force)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    tarball = rootfs_tarball_path()
    present = image_exists(client)
    print(f"image:    {DEFAULT_IMAGE} ({'present' if present else 'missing: run ' + BUILD_HINT})")
    print(f"rootfs:   {tarball} ({'cached' if tarball.exists() else 'not cached'})")
    print(f"packages: {' '.join(SANDBOX_PACKAGES)}")
    return 0 if present else 1


if __name__ == "__main__":
    sys.exit(main())
