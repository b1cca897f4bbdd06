"""The request type of pages that django-htmx's middleware has seen (portal/settings.py lists
it): ``request.htmx`` is truthy when htmx sent the request, and says which element it targets.
Annotate a view's request with it to read ``htmx`` typed; at run time it is Django's request.
"""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxRequest(HttpRequest):
    htmx: HtmxDetails
