"""Wall time of `make run` until the login page answers, on a machine where install has run.

Starts `make run` on free ports with a fresh var/ folder (so migrate and the demo data run in
full), polls http://127.0.0.1:PORT/accounts/login/ every 50 ms, prints the seconds, then stops
every process it started.

    python benchmarks/make_run_startup.py [--runs 3]
"""

import argparse
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def one_run(timeout: float = 120.0) -> float:
    """Seconds from starting `make run` to a 200 from the login page."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as var_dir:
        env = {
            **os.environ,
            "PORTAL_PORT": str(port),
            "CLOUDSIM_PORT": str(_free_port()),
            "PORTAL_VAR_DIR": var_dir,
        }
        start = time.monotonic()
        proc = subprocess.Popen(
            ["make", "run"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            while not _answers(f"http://127.0.0.1:{port}/accounts/login/"):
                if time.monotonic() - start > timeout or proc.poll() is not None:
                    raise RuntimeError("the login page never answered")
                time.sleep(0.05)
            return time.monotonic() - start
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    times = [one_run() for _ in range(args.runs)]
    print(
        "make run -> login page answers: "
        + ", ".join(f"{t:.2f} s" for t in times)
        + f" (best {min(times):.2f} s)"
    )


if __name__ == "__main__":
    main()
