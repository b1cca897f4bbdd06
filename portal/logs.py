"""Structured logs (structlog) for the web process, the Celery worker and beat.

Every line, whether written through ``logging`` (all of the portal, Django, Celery, azure-core)
or structlog, goes through one structlog ProcessorFormatter, which adds what the context
variables hold: ``request_id`` (common.request_id), ``task``/``task_id``/``workspace_id`` (the
Celery signals below) and ``azure_correlation_id``/``azure_request_id`` of the last Azure
response (cloud.clients). LOG_FORMAT "json" writes one JSON object a line (production);
"console" writes structlog's readable key=value lines (``make run``). Values under keys that
name secrets (authorization, token, password, secret, cookie, key) are replaced by "[redacted]",
and so are the values of secret-named query parameters (``access_token``, ``token``, ``code``,
``id_token``, ``client_secret``, ``password``, ``key``, ``sig``…) in any URL a line holds: the
rendered line is scrubbed last, so a request's repr, a message and an extra field all pass it.
gunicorn's and uvicorn's access lines pass the same rule (UrlSecretFilter, portal/gunicorn_conf.py).

structlog rather than django-structlog: the portal already logs through ``logging`` everywhere,
and needs its own request id rules (a sane X-Request-ID kept and echoed) and the Azure ids from
azure-core; django-structlog's middleware and Celery receivers would add a second request id
scheme beside ours. See docs/operations.md, "Logs".
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import MutableMapping
from typing import Any

import structlog
from celery import signals

FORMATS = ("json", "console")
REDACTED = "[redacted]"
# Substrings of keys whose values never reach a log line.
SECRET_KEYS = ("authorization", "token", "password", "secret", "cookie", "apikey", "api_key")


# A query parameter whose name holds one of these words: its value is a credential (OAuth's
# access_token, id_token, refresh_token and code; a token or key sent in the query string;
# client_secret; Azure SAS and other signatures).
_URL_SECRET = re.compile(
    r"([?&;][^=&\s\"'#?]*?(?:token|code|password|passwd|secret|key|sig|signature|credential)"
    r"[^=&\s\"'#?]*=)[^&;\s\"'#<>]*",
    re.IGNORECASE,
)


def redact_url_secrets(text: str) -> str:
    """``text`` with the values of secret-named query parameters replaced by REDACTED."""
    return _URL_SECRET.sub(lambda m: m.group(1) + REDACTED, text)


def _redact_rendered(_logger: Any, _name: str, rendered: Any) -> Any:
    """The last processor: the rendered line's URLs scrubbed (see redact_url_secrets)."""
    return redact_url_secrets(rendered) if isinstance(rendered, str) else rendered


class UrlSecretFilter(logging.Filter):
    """A handler filter for lines not rendered by ``formatter`` (gunicorn's and uvicorn's
    access and error logs): the message's URLs scrubbed (see redact_url_secrets)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        scrubbed = redact_url_secrets(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True


def redact_secrets(
    _logger: Any, _name: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: the values of secret-named keys, at any depth of dicts, hidden."""
    return {key: _redact(key, value) for key, value in event.items()}


def _redact(key: str, value: Any) -> Any:
    if any(word in key.lower() for word in SECRET_KEYS):
        return REDACTED
    if isinstance(value, dict):
        return {str(k): _redact(str(k), v) for k, v in value.items()}
    return value


def drop_refusal_traceback(
    _logger: Any, _name: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A refused request (a 4xx: Django logs its PermissionDenied with the exception) is a
    normal event: its line keeps the status and path, never a traceback (with locals, in the
    console format, ~100 lines per 403). A 5xx keeps its traceback."""
    code = event.get("status_code")
    if isinstance(code, int) and 400 <= code < 500:
        event.pop("exc_info", None)
    return event


def _shared_processors() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        structlog.stdlib.ExtraAdder(),
        drop_refusal_traceback,
    ]


def formatter(log_format: str = "json") -> structlog.stdlib.ProcessorFormatter:
    """The logging.Formatter of every handler (LOGGING's "()" factory). Raises ValueError for
    a format other than FORMATS."""
    if log_format not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {log_format!r}")
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    last = [structlog.processors.format_exc_info] if log_format == "json" else []
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_shared_processors(),
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            redact_secrets,  # Here, so lines from logging and from structlog both pass it.
            *last,
            renderer,
            _redact_rendered,
        ],
    )


def logger_levels(spec: str) -> dict[str, str]:
    """``"celery.app.trace=WARNING, celery.beat=WARNING"`` -> {logger: level}; ValueError
    (at start-up, from settings) for an entry without "=" or with a level logging lacks."""
    levels: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, level = (piece.strip() for piece in entry.partition("="))
        if not (name and sep) or not isinstance(logging.getLevelName(level.upper()), int):
            raise ValueError(f"LOG_LEVELS: give logger=LEVEL (e.g. celery.beat=WARNING): {entry}")
        levels[name] = level.upper()
    return levels


def logging_config(
    *, log_format: str, level: str, levels: dict[str, str] | None = None
) -> dict[str, Any]:
    """Django's LOGGING: one stream handler on the root logger with ``formatter``; azure-core
    at WARNING (its HTTP logging policy is chatty at INFO); ``levels``: other loggers' levels
    (LOG_LEVELS)."""
    structlog.configure(
        processors=[
            *_shared_processors()[:-2],  # ExtraAdder and after: logging's records only.
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"structured": {"()": formatter, "log_format": log_format}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "azure": {"level": "WARNING"},
            **{name: {"level": value} for name, value in (levels or {}).items()},
        },
    }


# --- Celery: the task, and the workspace it works on, on every line it writes -----------------


@signals.setup_logging.connect
def _keep_django_logging(**_: Any) -> None:
    """Answering this signal keeps Celery's worker and beat from configuring logging: without
    it they replace the root handler with their own plain-text one and set the level from
    ``-l``. Django's LOGGING (above, with LOG_LEVEL) stays in force in every process."""


@signals.before_task_publish.connect
def _carry_request_id(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """A task queued while a request is served carries that request's id."""
    request_id = structlog.contextvars.get_contextvars().get("request_id")
    if headers is not None and request_id:
        headers.setdefault("request_id", request_id)


@signals.task_prerun.connect
def _bind_task(
    task_id: str = "", task: Any = None, args: Any = (), kwargs: Any = None, **_: Any
) -> None:
    """Start each task with fresh context: its name and id, the request id it was queued under,
    and ``workspace_id`` when the task takes one (advance_workspace, refresh_slice_access)."""
    request = getattr(task, "request", None)
    eager = bool(getattr(request, "is_eager", False))
    if not eager:  # A worker's task: nothing of the previous task's context survives.
        structlog.contextvars.clear_contextvars()
    context: dict[str, Any] = {"task": getattr(task, "name", ""), "task_id": task_id}
    request_id = getattr(request, "request_id", None)
    if request_id:
        context["request_id"] = request_id
    workspace_id = _argument(task, "workspace_id", args or (), kwargs or {})
    if workspace_id is not None:
        context["workspace_id"] = str(workspace_id)
    tokens = structlog.contextvars.bind_contextvars(**context)
    if eager and request is not None:  # Run inside its caller: give the caller its own back.
        request.log_tokens = tokens


@signals.task_postrun.connect
def _unbind_task(task: Any = None, **_: Any) -> None:
    tokens = getattr(getattr(task, "request", None), "log_tokens", None)
    if tokens:
        structlog.contextvars.reset_contextvars(**tokens)
    else:
        structlog.contextvars.clear_contextvars()


def _argument(task: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if name in kwargs:
        return kwargs[name]
    try:
        bound = inspect.signature(task.run).bind_partial(*args, **kwargs)
    except (TypeError, ValueError, AttributeError):
        return None
    return bound.arguments.get(name)
