"""The telemetry agent the portal installs on every VM (``gpu_portal_agent.py``, shipped as one
file) and ``cloud_init``, which renders the VM's custom_data that installs it.

The wire format both follow is in docs/agent-protocol.md."""
