"""gpuportal: the portal's command line client (docs/cli.md). Talks to /api/v1/ only."""

__version__ = "0.1.0"
