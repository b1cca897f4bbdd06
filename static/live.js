// Live pages: when a topic this page shows changes (whoever changed it: a person, the worker,
// beat), re-fetch the page and swap each region marked data-live (by id) in place.
// The server tells of changes over one EventSource per tab (live/streams.py); where that
// fails for good, it polls /live/poll/ with If-None-Match and gets 304 while nothing changed.
(function () {
  "use strict";
  var MIN_GAP_MS = 2000; // at most one re-fetch per 2 s per tab
  var POLL_MS = 4000;
  var config, lastFetch = 0, timer = null, busy = false, again = false, held = false;

  function schedule() {
    if (timer) return;
    var wait = Math.max(0, lastFetch + MIN_GAP_MS - Date.now());
    timer = setTimeout(refresh, wait);
  }

  function refresh() {
    timer = null;
    if (busy) { again = true; return; }
    busy = true;
    lastFetch = Date.now();
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store",
                                  headers: { "X-Live-Refresh": "1" } })
      .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
      .then(function (html) { if (html) swap(html); })
      .catch(function () { again = true; })
      .finally(function () {
        busy = false;
        if (again) { again = false; schedule(); }
      });
  }

  function editing(region) {
    // Never swap away what someone is typing or choosing, nor a form they changed.
    var el = document.activeElement;
    if (el && region.contains(el) && el.matches("input, select, textarea")) return true;
    return Array.prototype.some.call(region.querySelectorAll("input, textarea, select"),
      function (f) {
        if (f.tagName === "SELECT") return changedSelect(f);
        if (f.type === "checkbox" || f.type === "radio") return f.checked !== f.defaultChecked;
        return f.type !== "hidden" && f.value !== f.defaultValue;
      });
  }

  function changedSelect(select) {
    // A single select with no option marked selected shows its first: that is its default.
    var options = Array.prototype.slice.call(select.options);
    if (select.multiple) {
      return options.some(function (o) { return o.selected !== o.defaultSelected; });
    }
    var initial = options.findIndex(function (o) { return o.defaultSelected; });
    return select.selectedIndex !== (initial < 0 ? 0 : initial);
  }

  function same(a, b) {
    // Each render masks the CSRF token anew: that alone is no change.
    var token = /name="csrfmiddlewaretoken" value="[^"]*"/g;
    return a.outerHTML.replace(token, "") === b.outerHTML.replace(token, "");
  }

  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    document.querySelectorAll("[data-live]").forEach(function (old) {
      var fresh = old.id && doc.getElementById(old.id);
      if (!fresh) return;
      // A <details> the reader opened (the notice area) stays open across the swap.
      var was = old.querySelectorAll("details");
      fresh.querySelectorAll("details").forEach(function (d, i) { if (was[i]) d.open = was[i].open; });
      if (same(fresh, old)) return;
      if (editing(old)) { held = true; return; }
      var node = document.importNode(fresh, true);
      old.replaceWith(node);
      if (window.htmx) window.htmx.process(node);
    });
  }

  function poll(etag) {
    var url = config.dataset.poll + "?t=" + encodeURIComponent(config.dataset.token);
    var headers = etag ? { "If-None-Match": etag } : {};
    fetch(url, { credentials: "same-origin", cache: "no-store", headers: headers })
      .then(function (r) {
        if (r.status === 200) {
          var fresh = r.headers.get("ETag");
          if (etag || fresh !== '"' + config.dataset.version + '"') schedule();
          etag = fresh;
        }
        if (r.status === 200 || r.status === 304) setTimeout(function () { poll(etag); }, POLL_MS);
      })
      .catch(function () { setTimeout(function () { poll(etag); }, POLL_MS); });
  }

  function open(version) {
    var url = config.dataset.stream + "?t=" + encodeURIComponent(config.dataset.token) +
      "&v=" + encodeURIComponent(version);
    var source = new EventSource(url);
    source.addEventListener("change", function (event) {
      seen = event.lastEventId || seen;
      schedule();
    });
    source.addEventListener("end", function () {
      // The session ended (the account was deactivated): no reconnect, no poll.
      source.close();
      stream = null;
      polling = true;
    });
    source.addEventListener("error", function () {
      // CONNECTING: the browser retries by itself. CLOSED: refused for good; poll instead.
      if (source.readyState === EventSource.CLOSED && source === stream) {
        stream = null;
        polling = true;
        poll(null);
      }
    });
    return source;
  }

  var stream = null, seen = "", polling = false;

  function follow() {
    // A browser holds 6 connections per host over HTTP/1.1: a hidden tab gives its stream
    // back and, when shown again, reopens it with the version it last saw, so it is told at
    // once of what changed meanwhile.
    if (polling) return;
    if (document.hidden && stream) { stream.close(); stream = null; }
    else if (!document.hidden && !stream) stream = open(seen);
  }

  function listen() {
    config = document.getElementById("live-config");
    if (!config) return;
    seen = config.dataset.version;
    document.addEventListener("focusout", function () { if (held) { held = false; schedule(); } });
    if (!window.EventSource) { poll(null); return; }
    document.addEventListener("visibilitychange", follow);
    follow();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", listen);
  else listen();
})();
