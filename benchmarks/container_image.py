"""Build time and size of the container image, and how soon a fresh container answers /healthz.

Builds `Containerfile` with podman (no cache unless --cached), prints the build's wall time and
the image's size, then starts the image's `web` role on the embedded default (SQLite, the
filesystem broker) with a read-only root filesystem and a volume for /app/var, as the chart runs
it, polls http://127.0.0.1:PORT/healthz every 100 ms and prints the seconds to the first 200.

    python benchmarks/container_image.py [--base IMAGE] [--cached] [--podman-arg ARG ...]

--base replaces the Containerfile's pinned python:3.11-slim-bookworm (e.g. a Debian bookworm
image with python3 and python3-venv made with debootstrap and `podman import`, where Docker Hub
cannot be reached). --podman-arg passes options to both `podman build` and `podman run`, e.g.
`--runtime runc --ulimit nofile=20000:20000` on a host whose cgroups crun refuses.
"""

import argparse
import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAG = "localhost/gpu-portal:bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _build(base: str | None, cached: bool, extra: list[str]) -> float:
    command = ["podman", "build", "--format", "docker", "-f", "Containerfile", "-t", TAG, *extra]
    if base:
        command += ["--build-arg", f"BASE_IMAGE={base}"]
    if not cached:
        command.append("--no-cache")
    started = time.perf_counter()
    subprocess.run([*command, "."], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _size_mb() -> float:
    out = subprocess.run(
        ["podman", "image", "inspect", TAG], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)[0]["Size"] / 1e6


def _healthz_seconds(extra: list[str]) -> float:
    port = _free_port()
    volume = f"gpu-portal-bench-{port}"
    command = ["podman", "run", "-d", "--rm", "--read-only", "-v", f"{volume}:/app/var"]
    command += ["-p", f"127.0.0.1:{port}:8000", *extra, TAG, "web"]
    started = time.perf_counter()
    container = subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()
    try:
        while time.perf_counter() - started < 120:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.1)
        raise SystemExit("/healthz did not answer 200 within 120 s")
    finally:
        subprocess.run(["podman", "rm", "-f", container], capture_output=True)
        subprocess.run(["podman", "volume", "rm", "-f", volume], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="base image instead of the Containerfile's")
    parser.add_argument("--cached", action="store_true", help="reuse podman's layer cache")
    parser.add_argument("--podman-arg", action="append", default=[], dest="extra")
    args = parser.parse_args()
    seconds = _build(args.base, args.cached, args.extra)
    print(f"build: {seconds:.1f} s ({'cached' if args.cached else 'no cache'})")
    print(f"image size: {_size_mb():.0f} MB")
    print(f"first 200 from /healthz after start: {_healthz_seconds(args.extra):.1f} s")


if __name__ == "__main__":
    main()
