"""One Docker image per task, built offline on top of the project's sandbox image.

    tag = image_tag(spec)                 # meta-agent-swe-task:<id>-<hash of the recipe>
    build_task_image(spec, layout)        # FROM the local sandbox image; no registry, no network

The image holds the buggy repo *as the policy sees it* at ``/repo`` (the old release with its old
tests, owned by the sandbox user, so an agent can edit it; the graded tests are laid in on the host
at grading time only)
and the test tools under ``/opt/swe-site`` (pytest, installed on the host with pip ``--target``
for the container's Python).  It holds nothing of the gold change: no new sdist, no pip cache,
no git history.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import docker
import docker.errors

from sandboxes.docker import SANDBOX_USER, connect_engine
from sandboxes.image import CONTAINER_PYTHON, DEFAULT_IMAGE, build_image, platform_args
from swe_env.sdist import BuildError, Layout, Log, cache_root, lay_out, publish
from swe_env.spec import Spec

IMAGE_REPO = "meta-agent-swe-task"
REPO_DIR = "/repo"
SITE = "/opt/swe-site"
TEST_TOOLS = ("pytest==8.4.2",)
"""Always in a task image (pinned: the tag names the content)."""
RECIPE_REVISION = 2
"""Bump when a build step changes image contents without changing the inputs hashed in ``image_key``."""


def image_key(spec: Spec) -> str:
    """A hash of everything that decides a task image's contents."""
    recipe = {
        "package": spec.package, "old": spec.old_version, "new": spec.new_version,
        "tests": list(spec.test_files), "tools": [*TEST_TOOLS, *spec.test_requires],
        "base": DEFAULT_IMAGE, "revision": RECIPE_REVISION,
    }
    if spec.origin == "git":  # the repo is a commit of a local clone plus the instance's test patch
        recipe["test_patch"] = hashlib.sha256(spec.test_patch.encode()).hexdigest()
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def image_tag(spec: Spec) -> str:
    return f"{IMAGE_REPO}:{spec.id}-{image_key(spec)}"


def test_site(requirements: tuple[str, ...], *, log: Log = print) -> Path:
    """A folder of the test tools installed for the container's Python (cached by requirement list)."""
    key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    site = cache_root() / "site" / key
    if site.is_dir():
        return site
    log(f"pip install --target for Python {CONTAINER_PYTHON}: {' '.join(requirements)}")
    site.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=site.parent))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-cache-dir", "--target", str(partial),
         "--only-binary=:all:", "--implementation", "cp", "--python-version", CONTAINER_PYTHON,
         *platform_args(), *requirements],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise BuildError(f"pip could not install the test tools {list(requirements)}:\n{proc.stderr[-1500:]}")
    shutil.rmtree(partial / "bin", ignore_errors=True)  # console scripts point at the host's Python
    publish(partial, site)
    return site


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_task_image(spec: Spec, layout: Layout, *, log: Log = print) -> str:
    """Build the task image unless it exists; return its tag."""
    client = connect_engine()
    tag = image_tag(spec)
    if image_exists(client, tag):
        return tag
    build_image(client, log=log)  # the sandbox image this one starts FROM (a no-op when present)
    site = test_site((*TEST_TOOLS, *spec.test_requires), log=log)
    log(f"docker build {tag}")
    with tempfile.TemporaryDirectory(prefix="swe-image-") as tmp:
        context = Path(tmp)
        shutil.copytree(layout.agent_repo, context / "repo", symlinks=False)  # never the graded tests
        shutil.copytree(site, context / "site", symlinks=False)
        (context / "Dockerfile").write_text(
            f"FROM {DEFAULT_IMAGE}\n"
            f"COPY --chown={SANDBOX_USER} repo {REPO_DIR}\n"
            f"COPY site {SITE}\n"
            f"ENV PYTHONPATH={SITE}\n"
            f"LABEL meta_agent.swe_task={spec.id} meta_agent.swe_key={image_key(spec)}\n"
            f"WORKDIR {REPO_DIR}\n"
        )
        try:
            client.images.build(path=str(context), tag=tag, rm=True, forcerm=True, pull=False, network_mode="none")
        except docker.errors.BuildError as exc:
            tail = "".join(str(chunk.get("stream", chunk)) for chunk in exc.build_log)[-1500:]
            raise BuildError(f"docker build of {tag} failed: {exc.msg}\n{tail}") from exc
    return tag


def ensure_built(spec: Spec, *, log: Log = print) -> str:
    """Lay out the task in the host cache and build its image if missing; return the tag."""
    layout = lay_out(spec, image_key(spec), log=log)
    return build_task_image(spec, layout, log=log)
