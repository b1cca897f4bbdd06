"""`python -m cloudsim`: serve the emulator in the foreground until interrupted."""

import argparse
import logging
import os
import signal
import sys

from . import aks, demo
from .agent_protocol import PROFILES
from .server import REQUEST_LOG, make_server
from .skus import DEFAULT_CATALOG


def _parser() -> argparse.ArgumentParser:
    env = os.environ
    parser = argparse.ArgumentParser(prog="cloudsim", description=__doc__)
    parser.add_argument("--host", default=env.get("CLOUDSIM_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(env.get("CLOUDSIM_PORT", "8100")))
    parser.add_argument(
        "--latency",
        type=float,
        default=float(env.get("CLOUDSIM_LATENCY", "3.0")),
        help="seconds a long-running operation stays InProgress",
    )
    parser.add_argument(
        "--retry-after",
        type=int,
        default=int(env.get("CLOUDSIM_RETRY_AFTER", "1")),
        help="Retry-After seconds sent with long-running operations",
    )
    parser.add_argument("--catalog", default=str(DEFAULT_CATALOG), help="VM size catalog CSV")
    parser.add_argument(
        "--agent-profile",
        choices=PROFILES,
        default=env.get("CLOUDSIM_AGENT_PROFILE", "busy"),
        help="GPU-use profile of the emulated telemetry agents of new VMs",
    )
    parser.add_argument(
        "--no-agents",
        dest="agents",
        action="store_false",
        default=env.get("CLOUDSIM_AGENTS", "1") != "0",
        help="do not play the VMs' telemetry agents (env CLOUDSIM_AGENTS=0)",
    )
    parser.add_argument(
        "--aks-cluster",
        default=env.get("CLOUDSIM_AKS_CLUSTER", ""),
        metavar="SUB/RG/NAME[/LOCATION]",
        help="create this AKS managed cluster at startup (location default eastus)",
    )
    parser.add_argument(
        "--demo-quota",
        action="store_true",
        default=env.get("CLOUDSIM_DEMO_QUOTA", "0") == "1",
        help="give the subscription the demo vCPU quota (cloudsim/demo.py; CLOUDSIM_DEMO_QUOTA=1)",
    )
    parser.add_argument(
        "--drivers-required",
        action="store_true",
        default=env.get("CLOUDSIM_DRIVERS_REQUIRED", "0") == "1",
        help="a VM's agent sees GPUs only once it has an NVIDIA driver: from its image or the "
        "driver extension (cloudsim/extensions.py; CLOUDSIM_DRIVERS_REQUIRED=1)",
    )
    parser.add_argument(
        "--quiet-requests",
        action="store_true",
        default=env.get("CLOUDSIM_LOG_REQUESTS", "1") == "0",
        help="no log line per HTTP request (env CLOUDSIM_LOG_REQUESTS=0; `make run` sets it)",
    )
    return parser


def _aks_cluster(parser: argparse.ArgumentParser, value: str) -> list[str] | None:
    """["sub", "rg", "name", "location"] from SUB/RG/NAME[/LOCATION], None when unset."""
    if not value:
        return None
    parts = value.strip("/").split("/")
    if len(parts) not in (3, 4) or not all(p.strip() for p in parts):
        parser.error("CLOUDSIM_AKS_CLUSTER / --aks-cluster must be SUB/RG/NAME[/LOCATION]")
    return parts if len(parts) == 4 else [*parts, "eastus"]


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C; returns the process exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.agent_profile not in PROFILES:  # argparse checks choices on the command line only.
        parser.error(f"CLOUDSIM_AGENT_PROFILE must be one of {', '.join(PROFILES)}")
    cluster = _aks_cluster(parser, args.aks_cluster)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    if args.quiet_requests:  # a line per request: ~40 a minute while the demo idles
        logging.getLogger(REQUEST_LOG).setLevel(logging.WARNING)
    sim = make_server(
        args.host,
        args.port,
        args.latency,
        args.retry_after,
        args.catalog,
        agents=args.agents,
        agent_profile=args.agent_profile,
    )
    if args.demo_quota:
        demo.apply_demo_quota(sim.state)
    with sim.state.lock:  # kept by /_sim/reset too
        sim.state.drivers_required = sim.state.extension_play.drivers_required = (
            args.drivers_required
        )
    if cluster is not None:
        with sim.state.lock:
            aks.create_cluster_now(sim.state, *cluster)
        logging.getLogger("cloudsim").info("AKS cluster %s created", "/".join(cluster))
    logging.getLogger("cloudsim").info(
        "cloudsim listening on %s (latency %.2fs, Retry-After %ss, agents %s)",
        sim.url,
        args.latency,
        args.retry_after,
        args.agent_profile if args.agents else "off",
    )
    # honcho and Kubernetes stop a process with SIGTERM: end as on Ctrl-C, so the JupyterLab
    # processes the emulator started (cloudsim.jupyter) stop with it.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        sim.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        sim.shutdown()
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
