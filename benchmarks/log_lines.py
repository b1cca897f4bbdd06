"""What a structured log line costs (portal/logs.py), and what the heartbeat fast path pays
for its request id (common/request_id.py), in microseconds, on this machine.

Formats N lines through the JSON and the console formatter, with a request id, a workspace id
and an Azure correlation id bound, writing to an in-memory stream; and binds N request ids.
Prints the median of 5 runs per case.

    python benchmarks/log_lines.py            # 20,000 lines per run
    python benchmarks/log_lines.py -n 100000
"""

import argparse
import io
import logging
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=20_000)
    n = parser.parse_args().n
    import django

    django.setup()
    import structlog

    from common.request_id import request_id_bind
    from portal.logs import formatter

    for name in ("json", "console"):
        logger = logging.getLogger(f"bench.{name}")
        logger.propagate = False
        handler = logging.StreamHandler(io.StringIO())
        handler.setFormatter(formatter(name))
        logger.addHandler(handler)
        structlog.contextvars.bind_contextvars(
            request_id="0" * 32, workspace_id="1" * 36, azure_correlation_id="2" * 36
        )
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            for i in range(n):
                logger.info("Workspace %s deallocated", i)
            runs.append((time.perf_counter() - start) / n * 1e6)
        print(f"{name:8} log line: {statistics.median(runs):6.1f} µs")
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            request_id_bind("afd-20261124T1500Z-4f2a")
        runs.append((time.perf_counter() - start) / n * 1e6)
    print(f"request id bind:  {statistics.median(runs):6.2f} µs (sane X-Request-ID kept)")


if __name__ == "__main__":
    main()
