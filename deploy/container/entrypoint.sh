#!/bin/sh
# The image's entrypoint: one image, four roles, chosen by the first argument.
#   web      gunicorn with uvicorn workers (portal.asgi), on 0.0.0.0:$PORTAL_PORT
#   worker   a Celery worker
#   beat     Celery beat (one per deployment unless the beat lock is on: docs/operations.md)
#   migrate  manage.py migrate, then exit (the chart's pre-install/pre-upgrade Job)
# Anything else is run as a command (e.g. `manage.py shell`, `sh`). Extra arguments after the
# role are passed on to gunicorn / celery / migrate.
set -eu
role="${1:-web}"
[ "$#" -gt 0 ] && shift

# prometheus-client's multiprocess mode keeps one file per process in this folder; files of a
# previous run would be counted again, so a process that starts empties it (client's docs).
if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
    mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
    find "$PROMETHEUS_MULTIPROC_DIR" -mindepth 1 -maxdepth 1 -name '*.db' -delete
fi
mkdir -p "${PORTAL_VAR_DIR:-/app/var}"

case "$role" in
    web)
        # --forwarded-allow-ips '': uvicorn trusts no X-Forwarded-*; the portal reads them
        # itself, TRUSTED_PROXY_COUNT deep (portal/settings.py). --no-control-socket: gunicorn's
        # control socket would go under $HOME (/app, read-only) and nothing here uses it.
        # -c: drops a dead worker's live gauges from the metrics files (portal/gunicorn_conf.py).
        exec gunicorn -c portal/gunicorn_conf.py portal.asgi:application -k uvicorn_worker.UvicornWorker \
            --bind "0.0.0.0:${PORTAL_PORT:-8000}" --workers "${WEB_CONCURRENCY:-2}" \
            --graceful-timeout "${GRACEFUL_TIMEOUT:-20}" --forwarded-allow-ips '' \
            --no-control-socket --access-logfile - "$@" ;;
    worker)
        exec celery -A portal worker --loglevel "${LOG_LEVEL:-INFO}" \
            --concurrency "${CELERY_CONCURRENCY:-2}" "$@" ;;
    beat)
        exec celery -A portal beat --loglevel "${LOG_LEVEL:-INFO}" \
            --schedule "${PORTAL_VAR_DIR:-/app/var}/celerybeat-schedule" "$@" ;;
    migrate)
        exec python3 manage.py migrate --noinput "$@" ;;
    *)
        exec "$role" "$@" ;;
esac
