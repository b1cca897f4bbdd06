"""The portal's JSON API at /api/v1/ (django-ninja): parse, call a service or selector, answer.

No rule lives here: every route calls the same services and selectors as the HTML views, under
the same django-rules permissions, so the browser, the API and the CLI share each rule."""
