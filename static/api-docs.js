// Starts Swagger UI on /api/v1/docs (templates/api/swagger.html) from the settings the page
// carries as JSON: a static file, so the page needs no inline script under the CSP.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("swagger-settings").textContent);
  var csrfToken = document.body.dataset.csrfToken;
  config.dom_id = "#swagger-ui";
  config.presets = [SwaggerUIBundle.presets.apis];
  if (csrfToken) {
    // "Try it out" from a signed-in session: the API checks CSRF for session callers.
    config.requestInterceptor = function (request) {
      request.headers["X-CSRFToken"] = csrfToken;
      return request;
    };
  }
  window.ui = SwaggerUIBundle(config);
})();
