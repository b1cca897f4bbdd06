"""The GPU memory estimate: the answer time of ``GET /sizing/estimate`` and the hand-worked
examples against the function's output.

For each stack, a fresh database (SQLite file, or PostgreSQL ``portal_bench_sizing``) with
the demo data (``seed_demo``: the Azure GPU catalog of every region, Vision Lab and its
cluster, registered in the emulator started here; its MIG pools marked ready, as the worker
would leave them), then N calls of each query as alice through Django's test client, in this
process: median and p95 server time in milliseconds, and the SQL queries per call. Then the
table of hand-worked examples (Transformer Math 101, the ZeRO paper, the KV cache formula).

    python benchmarks/sizing_estimate.py                    # both stacks, 200 calls each
    python benchmarks/sizing_estimate.py --stack embedded -n 50
"""

import argparse
import logging
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "portal_bench_sizing"
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

QUERIES = {
    "issue: 7B fp16 inference": "parameters_b=7&precision=fp16&workload=inference",
    "Llama-3-8B, 8k ctx, batch 8": "preset=llama-3-8b&precision=bf16&workload=inference"
    "&context_length=8192&batch=8",
    "7B full fine-tune (Adam)": "parameters_b=7&precision=bf16&workload=full_finetune",
    "bad input (400)": "parameters_b=-1&precision=fp16&workload=inference",
}


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def _examples() -> list[tuple[str, str, str]]:
    """(example, worked by hand, the function's output)."""
    from workspaces.sizing.estimate import PRESETS, Precision, Workload, gpu_memory_estimate

    seven = {"parameters_b": Decimal(7)}
    fp16 = gpu_memory_estimate(**seven, precision=Precision.FP16, workload=Workload.INFERENCE)
    llama = PRESETS["llama-3-8b"]
    kv = gpu_memory_estimate(
        parameters_b=llama.parameters_b,
        precision=Precision.FP16,
        workload=Workload.INFERENCE,
        shape=llama.shape,
        context_length=8192,
    )
    big = PRESETS["llama-3-70b"]
    kv70 = gpu_memory_estimate(
        parameters_b=big.parameters_b,
        precision=Precision.BF16,
        workload=Workload.INFERENCE,
        shape=big.shape,
        context_length=8192,
    )
    adam = gpu_memory_estimate(**seven, precision=Precision.BF16, workload=Workload.FULL_FINETUNE)
    states = adam.weights + adam.gradients + adam.optimizer_states
    int4 = gpu_memory_estimate(**seven, precision=Precision.INT4, workload=Workload.INFERENCE)
    return [
        (
            "7B FP16 weights",
            "7e9 × 2 B = 14 GB = 13.04 GiB",
            f"{fp16.weights / 1e9:g} GB = {fp16.breakdown_gib()['weights']} GiB",
        ),
        (
            "Llama-3-8B KV cache, 8192 tokens, batch 1, FP16",
            "2×32×8×128×8192×2 = 1,073,741,824 B = 1.00 GiB",
            f"{kv.kv_cache:,} B = {kv.breakdown_gib()['kv_cache']} GiB",
        ),
        (
            "Llama-3-70B KV cache, 8192 tokens, batch 1, BF16",
            "2×80×8×128×8192×2 = 2,684,354,560 B = 2.50 GiB",
            f"{kv70.kv_cache:,} B = {kv70.breakdown_gib()['kv_cache']} GiB",
        ),
        (
            "7B full fine-tuning, Adam, mixed precision",
            "7e9 × (2+2+12) = 16 B/param = 112 GB = 104.31 GiB",
            f"{states / 7e9:g} B/param = {states / 1e9:g} GB = "
            f"{(Decimal(states) / 2**30).quantize(Decimal('0.01'))} GiB",
        ),
        (
            "7B INT4 weights",
            "7e9 × 0.5 B = 3.5 GB = 3.26 GiB",
            f"{int4.weights / 1e9:g} GB = {int4.breakdown_gib()['weights']} GiB",
        ),
    ]


def child(stack: str, n: int) -> None:
    from cloudsim import start_server

    sim_server = start_server(port=0, latency=0, retry_after=0)
    os.environ.update(AZURE_ENDPOINT=sim_server.url, AZURE_POLLING_INTERVAL="0.05")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from clusters.models import NodePool, PoolStatus
    from workspaces.models import SizeOffering

    logging.getLogger("django.request").setLevel(logging.ERROR)  # the 400s are meant
    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    NodePool.objects.update(status=PoolStatus.READY)
    sizes = SizeOffering.objects.filter(offered=True).count()
    client = Client(HTTP_ACCEPT="application/json")
    client.force_login(get_user_model().objects.get(username="alice"))
    print(f"{stack}: {sizes} offered sizes, {NodePool.objects.count()} node pools")
    for name, query in QUERIES.items():
        client.get(f"/sizing/estimate?{query}")  # warm-up
        times = []
        for _ in range(n):
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                response = client.get(f"/sizing/estimate?{query}")
                times.append((time.perf_counter() - t0) * 1000)
        fits = len(response.json().get("fits", [])) if response.status_code == 200 else 0
        print(
            f"  {name:30} {response.status_code} fits={fits:2} n={n} "
            f"median={statistics.median(times):6.2f} ms p95={_percentile(times, 95):6.2f} ms "
            f"queries={len(queries)}"
        )
    sim_server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=["embedded", "postgres", "both"], default="both")
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.stack, args.n)
    for stack in ["embedded", "postgres"] if args.stack == "both" else [args.stack]:
        with tempfile.TemporaryDirectory() as var_dir:
            env = {**os.environ, "PORTAL_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING"}
            env.update(DJANGO_SETTINGS_MODULE="portal.settings", ALLOWED_HOSTS="testserver")
            if stack == "postgres":
                import psycopg

                with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                    conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
                    conn.execute(f"CREATE DATABASE {BENCH_DB}")
                env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"
            else:
                env["DATABASE_URL"] = f"sqlite:///{var_dir}/bench.sqlite3"
            cmd = [sys.executable, __file__, "--child", "--stack", stack, "-n", str(args.n)]
            subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    print("\nHand-worked examples against gpu_memory_estimate:\n")
    print("| example | by hand | function |\n|---|---|---|")
    for example, hand, got in _examples():
        print(f"| {example} | {hand} | {got} |")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
