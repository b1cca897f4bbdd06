"""`python -m cloudsim`: serve the emulator in the foreground until interrupted."""

import argparse
import logging
import os
import sys

from .server import make_server
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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C; returns the process exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    sim = make_server(args.host, args.port, args.latency, args.retry_after, args.catalog)
    logging.getLogger("cloudsim").info(
        "cloudsim listening on %s (latency %.2fs, Retry-After %ss)",
        sim.url,
        args.latency,
        args.retry_after,
    )
    try:
        sim.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        sim.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
