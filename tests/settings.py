"""The portal's own settings (portal.settings) for the test suite, with a random SECRET_KEY per
run unless one is given: the suite also runs on PostgreSQL and Redis, where the portal refuses
to start without a key (portal/secret_key.py). The key is put in the environment, so the
Celery workers and servers that tests start as subprocesses sign with the same key."""

import os
import secrets

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

from portal.settings import *  # noqa: E402, F403
