"""gunicorn settings the Procfile loads (-c): prometheus-client's multiprocess clean-up, and
access and error lines with secret query parameters redacted.

In multiprocess mode (PROMETHEUS_MULTIPROC_DIR) each worker writes its metrics to files there;
the "live" gauges (the heartbeat buffers', common.metrics) of a worker that exited must be
dropped, or /metrics would keep showing its last values.
"""

import os

from gunicorn.glogging import Logger

from portal.logs import UrlSecretFilter


class RedactingLogger(Logger):
    """gunicorn's logger whose handlers scrub secret query parameters (``?access_token=…``)
    from every line. uvicorn's worker logs its access lines through these same handlers."""

    def setup(self, cfg):
        super().setup(cfg)
        for log in (self.access_log, self.error_log):
            for handler in log.handlers:
                handler.addFilter(UrlSecretFilter())


logger_class = RedactingLogger


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Loaded only with multiprocess metrics on.
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
