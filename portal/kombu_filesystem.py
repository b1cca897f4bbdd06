"""kombu's filesystem transport, with each message written whole before a worker can see it.

kombu 5.7 creates the message file in the folder workers read, then writes it. A worker that
lists the folder in between moves and reads an empty file, and dies on the JSON error. Here
the message is written in a staging folder beside it and renamed into place, which is atomic
on one file system. Used by the embedded default (``CELERY_BROKER_URL=filesystem://``).

A worker's wait for messages returns at least every DRAIN_MAX seconds, so a SIGTERM stops it
within a second (honcho, `make run`, kills what has not stopped 5 s after its SIGTERM).
"""

import os
import uuid
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# Seconds a worker's wait for messages may block. Celery drives a transport without an event
# loop (this one) through its synloop, which waits 2 s per drain and reads the warm-shutdown
# flag of a SIGTERM only between drains; shorter drains let the worker stop at once.
DRAIN_MAX = 0.2


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue`` as one file that appears complete or not at all."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        staging = os.path.join(os.path.dirname(os.path.abspath(self.data_folder_out)), "staging")
        os.makedirs(staging, exist_ok=True)
        temporary = os.path.join(staging, name)
        with open(temporary, "wb") as f:
            f.write(str_to_bytes(dumps(payload)))
        os.replace(temporary, os.path.join(self.data_folder_out, name))


class Transport(filesystem.Transport):
    Channel = Channel

    def drain_events(self, connection, timeout=None):
        """Wait for messages at most DRAIN_MAX seconds at a time (``timeout``: seconds)."""
        if timeout:
            timeout = min(timeout, DRAIN_MAX)
        return super().drain_events(connection, timeout=timeout)
