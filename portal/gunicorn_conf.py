"""gunicorn settings the Procfile loads (-c): prometheus-client's multiprocess clean-up.

In multiprocess mode (PROMETHEUS_MULTIPROC_DIR) each worker writes its metrics to files there;
the "live" gauges (the heartbeat buffers', common.metrics) of a worker that exited must be
dropped, or /metrics would keep showing its last values.
"""

import os


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
