"""The portal's own settings (portal.settings) for the test suite, with a random SECRET_KEY per
run unless one is given: the suite also runs on PostgreSQL and Redis, where the portal refuses
to start without a key (portal/secret_key.py). The key is put in the environment, so the
Celery workers and servers that tests start as subprocesses sign with the same key."""

import os
import secrets

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
# No persistent connections: live_server answers each request in a new thread, and a thread's
# connection kept for reuse (production's 60 s) outlives the thread, so a session of browser
# tests on two xdist workers ran PostgreSQL out of connections ("too many clients already").
# In the environment, so the Celery workers and servers the tests start do the same.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")

from portal.settings import *  # noqa: E402, F403
