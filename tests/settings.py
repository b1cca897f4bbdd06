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

# Azure where a test did not start the emulator (the `sim` fixture): a port nothing listens on,
# and the emulator's short retry waits. A test that forgets `sim` but sends the portal to Azure
# (a request's quota check, a task queued on commit) is refused at once instead of waiting out
# azure-core's backoff (0.8 s doubling, 5.6 s a call: a CLI test spent 44 s so), and never
# reaches an emulator that `make run` may have on its default port 8100.
# Processes a test starts (Celery workers, servers) load these settings too and are given the
# emulator's address in their environment: that is kept.
if "AZURE_ENDPOINT" not in os.environ:
    AZURE_ENDPOINT = "http://127.0.0.1:9"
    AZURE_PRICES_ENDPOINT = AZURE_ENDPOINT
if "AZURE_RETRY_BACKOFF" not in os.environ:
    AZURE_RETRY_BACKOFF = 0.01
if "AZURE_RETRY_TOTAL" not in os.environ:
    AZURE_RETRY_TOTAL = 2
