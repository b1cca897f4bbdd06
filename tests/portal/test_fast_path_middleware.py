"""The heartbeat fast path (portal/wsgi.py) answers in front of Django's middleware: a
middleware added to MIDDLEWARE must say whether heartbeats skip it, or `manage.py check`
(and so `make lint` and every start-up's checks) fails."""

from django.core import checks


def _errors():
    return [e for e in checks.run_checks() if e.id == "workspaces.E001"]


def test_every_middleware_of_the_settings_is_reviewed_for_the_fast_path():
    assert _errors() == []


def test_a_middleware_added_without_a_word_on_heartbeats_fails_the_check(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "portal.middleware.AuditEveryRequest"]

    errors = _errors()

    assert [e.msg.split()[0] for e in errors] == ["portal.middleware.AuditEveryRequest"]
    assert "FAST_PATH_SKIPS" in errors[0].hint
