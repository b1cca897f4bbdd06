"""One router per area (workspaces, teams, offerings, approvals...), each added in api/main.py."""
