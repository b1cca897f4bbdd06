import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()

from workspaces.api import heartbeat_fast_path  # noqa: E402 (needs the apps loaded)

application = heartbeat_fast_path(application)
