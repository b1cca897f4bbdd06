from django.http import HttpRequest

from workspaces.telemetry import demo_timings_note


def demo_timings(request: HttpRequest) -> dict[str, str]:
    """The demo timings note for every page ("" in production: no query, no work)."""
    return {"demo_timings": demo_timings_note()}
