#!/usr/bin/env bash
# Make sure a Docker engine answers, for CI and fresh Debian machines (run as root).
#
#   bash scripts/start_docker.sh && python -m sandboxes.image build
#
# Idempotent: exits 0 at once when `docker info` already works.  Otherwise installs
# docker.io and debootstrap (the offline image build needs it) if missing, starts
# dockerd in the background with its log in /tmp/dockerd.log, and waits up to 60 s.
# The engine does not outlive the machine's session: run this again after a restart.
set -euo pipefail

LOG=/tmp/dockerd.log
WAIT_S=${DOCKER_WAIT_S:-60}

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    echo "docker engine already running"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "error: no Docker engine answers and starting one needs root; rerun as root (sudo bash $0)" >&2
    exit 1
fi

if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    echo "installing docker.io and debootstrap"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io debootstrap
fi

start_dockerd() {
    echo "starting dockerd (log: $LOG)"
    nohup dockerd >"$LOG" 2>&1 &
}

if pidof dockerd >/dev/null 2>&1; then
    echo "dockerd is already running; waiting for it to answer"
else
    start_dockerd
fi

for _ in $(seq "$WAIT_S"); do
    if docker info >/dev/null 2>&1; then
        echo "docker engine is up"
        exit 0
    fi
    # a dockerd found above may have been shutting down (a stop just before this script): start a new one
    if ! pidof dockerd >/dev/null 2>&1; then
        start_dockerd
    fi
    sleep 1
done

echo "error: dockerd did not answer within ${WAIT_S}s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
