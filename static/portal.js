// Tell the server the browser's time zone, so times are shown in it (portal/middleware.py).
(function () {
  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (tz && document.cookie.indexOf("tz=" + tz) === -1) {
      document.cookie = "tz=" + tz + "; path=/; SameSite=Lax; max-age=31536000";
    }
  } catch (e) { /* an old browser keeps the server's default zone */ }
})();
