"""cloudsim: a local emulator of the slice of Azure Resource Manager the portal uses.

    from cloudsim import start_server
    sim = start_server(port=0, latency=0.05)   # daemon thread, free port
    sim.url, sim.state, sim.shutdown()

It also plays the telemetry agent of every running VM (agents.py, docs/agent-protocol.md), and
Entra ID and the Microsoft Graph subset the portal calls (cloudsim/entra).
Run standalone with `python -m cloudsim --port 8100`. Standard library only, but for Entra ID's
signed tokens: PyJWT with cryptography.
"""

from .cloud import Cloud
from .control import SimControl, SimControlError
from .server import SimServer, make_server, start_server

__all__ = ["Cloud", "SimControl", "SimControlError", "SimServer", "make_server", "start_server"]
