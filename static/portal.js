// Tell the server the browser's time zone, so times are shown in it (portal/middleware.py).
(function () {
  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (tz && document.cookie.indexOf("tz=" + tz) === -1) {
      document.cookie = "tz=" + tz + "; path=/; SameSite=Lax; max-age=31536000";
    }
  } catch (e) { /* an old browser keeps the server's default zone */ }
})();

// Copy buttons: <button data-copy-target="#id"> copies the text of that element (an ssh command,
// kubectl lines, a token). One listener on the document, so panels htmx swaps in work too.
// The Clipboard API needs a secure context (HTTPS or localhost); elsewhere the text is selected
// and copied the old way. The result is said in the button and to screen readers (aria-live).
(function () {
  function say(button, text) {
    var label = button.getAttribute("data-label") || button.textContent;
    button.setAttribute("data-label", label);
    button.textContent = text;
    var live = document.getElementById("copy-status");
    if (live) { live.textContent = text; }
    setTimeout(function () { button.textContent = label; }, 2000);
  }
  function selectAndCopy(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-target]");
    if (!button) { return; }
    var node = document.querySelector(button.getAttribute("data-copy-target"));
    if (!node) { return; }
    var text = node.textContent.trim();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { say(button, "Copied"); },
        function () { say(button, selectAndCopy(node) ? "Copied" : "Press Ctrl+C"); }
      );
    } else {
      say(button, selectAndCopy(node) ? "Copied" : "Press Ctrl+C");
    }
  });
})();

// The error summary of a failed form (templates/common/_error_summary.html): focused on load, so
// it is read out and the next Tab goes through its links; a link moves focus to its field (or
// the first control of its fieldset), as an anchor alone only scrolls.
(function () {
  function ready() {
    var summary = document.getElementById("error-summary");
    if (!summary) { return; }
    summary.focus();
    summary.addEventListener("click", function (event) {
      var link = event.target.closest("a[href^='#']");
      var target = link && document.getElementById(link.getAttribute("href").slice(1));
      if (!target) { return; }
      var field = target.matches("input, select, textarea") ? target
        : target.querySelector("input:not([type=hidden]), select, textarea");
      event.preventDefault();
      target.scrollIntoView({ block: "center" });
      (field || target).focus({ preventScroll: true });
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", ready); }
  else { ready(); }
})();

// Forms that ask first: <form data-confirm="Delete …?"> (the CSP allows no onsubmit="").
document.addEventListener("submit", function (event) {
  var message = event.target.getAttribute && event.target.getAttribute("data-confirm");
  if (message && !window.confirm(message)) {
    event.preventDefault();
    event.stopImmediatePropagation();
  }
}, true);

// The request form's equivalent sizes follow its size and Spot choices: htmx listens for
// "offering-change" on the body (an hx-trigger filter would need eval, which the CSP forbids).
document.addEventListener("change", function (event) {
  var name = event.target && event.target.name;
  if (name === "offering" || name === "spot") {
    document.body.dispatchEvent(new CustomEvent("offering-change"));
  }
});

// The GPU memory estimate: choosing a preset fills the fields it gives (parameters and shape,
// from the model's config.json: the #estimate-presets JSON), so they show what is estimated.
// A field someone typed in is theirs and kept; those the last preset filled follow the next
// preset, or empty for "None" (the estimate takes a given number over the preset's).
(function () {
  document.addEventListener("change", function (event) {
    var select = event.target;
    if (!select.matches || !select.matches("#estimate-form select[name=preset]")) { return; }
    var data = document.getElementById("estimate-presets");
    if (!data) { return; }
    var values = JSON.parse(data.textContent)[select.value] || {};
    select.form.querySelectorAll("input[type=number], input[type=text]").forEach(function (input) {
      var filled = input.dataset.fromPreset === "1";
      if (!filled && input.value !== "") { return; }
      if (Object.prototype.hasOwnProperty.call(values, input.name)) {
        input.value = values[input.name];
        input.dataset.fromPreset = "1";
      } else if (filled) {
        input.value = "";
        delete input.dataset.fromPreset;
      }
    });
  });
  document.addEventListener("input", function (event) {
    // Typed over: no longer the preset's.
    if (event.target.dataset) { delete event.target.dataset.fromPreset; }
  });
})();
