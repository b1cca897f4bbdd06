"""What merging DCGM readings into heartbeats costs a flush (workspaces/gpu_evidence.py), in
milliseconds, with the cache CACHE_URL names (production: Redis).

A flush of 500 one-sample heartbeats (2,000 heartbeats/s x HEARTBEAT_FLUSH_SECONDS 0.25) while
the scan keeps readings of 2,000 MIG slices, 17 of which are in the batch (2,000 slices each
sending every 30 s, over 0.25 s). Prints the mean of N flushes with PROMETHEUS_URL unset, set
with no readings kept, and set with the readings kept.

    CACHE_URL=redis://127.0.0.1:6379/1 python benchmarks/gpu_readings_merge.py [-n 200]
"""

import argparse
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=200)
    n = parser.parse_args().n
    import django

    django.setup()
    from django.conf import settings
    from django.core.cache import cache

    from workspaces.gpu_evidence import KEY, GpuReading, gpu_readings_merge, gpu_readings_record
    from workspaces.telemetry import ParsedSample

    now = datetime.now(UTC)
    slices = [uuid.uuid4() for _ in range(2000)]
    batch = [(pk, [ParsedSample(now, "ok", [], None, 500, 0, 1)]) for pk in slices[:17]]
    batch += [(uuid.uuid4(), [ParsedSample(now, "ok", [], 50, 500, 0, 1)]) for _ in range(483)]

    def timed(label: str) -> None:
        gpu_readings_merge(batch=batch)  # The cache's connection, once.
        start = time.perf_counter()
        for _ in range(n):
            gpu_readings_merge(batch=batch)
        mean = (time.perf_counter() - start) / n * 1000
        print(f"{label}: {mean:.2f} ms per flush of {len(batch)} heartbeats")

    cache.delete(KEY)
    settings.PROMETHEUS_URL = ""
    timed("PROMETHEUS_URL unset")
    settings.PROMETHEUS_URL = "http://prometheus.invalid"
    timed("PROMETHEUS_URL set, no readings kept")
    gpu_readings_record(readings={pk: GpuReading(now, 90, 5000) for pk in slices})
    timed("PROMETHEUS_URL set, 2,000 readings kept, 17 merged")
    merged = gpu_readings_merge(batch=batch)
    assert sum(samples[0].gpu_util == 90 for _, samples in merged) == 17
    cache.delete(KEY)


if __name__ == "__main__":
    main()
