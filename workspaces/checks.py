"""System checks of the workspaces app (``manage.py check``, and every start-up)."""

from typing import Any

from django.conf import settings
from django.core import checks

from workspaces.api import fast_path_unreviewed


@checks.register()
def fast_path_middleware(app_configs: object = None, **kwargs: Any) -> list[checks.Error]:
    """workspaces.E001 for each middleware in settings.MIDDLEWARE that the heartbeat fast path
    (portal/wsgi.py, workspaces.api.heartbeat_fast_path) skips without FAST_PATH_SKIPS saying
    why."""
    return [
        checks.Error(
            f"{name} is in MIDDLEWARE, but heartbeats (workspaces.api.heartbeat_fast_path) do "
            "not pass through it.",
            hint="Add it to workspaces.api.FAST_PATH_SKIPS with the reason heartbeats do not "
            "need it, or apply it on the fast path.",
            id="workspaces.E001",
        )
        for name in fast_path_unreviewed(list(settings.MIDDLEWARE))
    ]
