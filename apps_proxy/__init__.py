"""Workspaces in the browser: JupyterLab (and its terminal) and shared ports, served from a
separate origin through the portal's own reverse proxy (apps_proxy.asgi). docs/apps.md."""
