"""The API's docs page (/api/v1/docs): Swagger UI from the portal's own static files.

django-ninja's Swagger page loads Swagger UI from a CDN unless "ninja" is an installed app, and
its bundled copy is whatever version that ninja release carries. The portal serves the version
it pins in static/vendor/swagger-ui/ (vendored from npm, as Bootstrap is: static/vendor/
README.md), so the page works on a private network with no internet and runs no third-party
origin's code in the portal's origin. No inline script: the settings travel as a JSON data
block and static/api-docs.js starts Swagger UI, so the page passes the Content-Security-Policy.
"""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from ninja import NinjaAPI
from ninja.openapi.docs import Swagger, _csrf_needed

SETTINGS = {
    "layout": "BaseLayout",
    "deepLinking": True,
    # Swagger UI would otherwise send the schema to validator.swagger.io for its badge.
    "validatorUrl": None,
}


class PortalSwagger(Swagger):
    """ninja's Swagger docs, rendered from templates/api/swagger.html."""

    template = "api/swagger.html"

    def __init__(self) -> None:
        super().__init__(settings=SETTINGS)

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        settings = {**self.settings, "url": self.get_openapi_url(api, kwargs)}
        context = {"settings": settings, "api": api, "add_csrf": _csrf_needed(api)}
        return render(request, self.template, context)
