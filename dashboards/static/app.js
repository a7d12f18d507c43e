// neuron-compat dashboard: small progressive enhancements; every page works without this file.
(function () {
  "use strict";

  // Copy buttons: <button data-copy="#element-id">; reports success in an aria-live region.
  document.querySelectorAll("button[data-copy]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var src = document.querySelector(btn.getAttribute("data-copy"));
      if (!src) return;
      var text = src.value !== undefined && src.tagName === "TEXTAREA" ? src.value : src.textContent;
      var done = function () {
        var label = btn.textContent;
        btn.textContent = "Copied";
        btn.setAttribute("data-copied", "1");
        setTimeout(function () { btn.textContent = label; }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
      } else { fallbackCopy(text); done(); }
    });
  });

  function fallbackCopy(text) {
    var ta = document.createElement("textarea");
    ta.value = text; ta.setAttribute("readonly", ""); ta.style.position = "absolute"; ta.style.left = "-9999px";
    document.body.appendChild(ta); ta.select();
    try { document.execCommand("copy"); } catch (e) { /* clipboard blocked: the text stays selectable */ }
    document.body.removeChild(ta);
  }

  // Filters: auto-submit selects so the URL (shareable) always reflects the view.
  document.querySelectorAll("form[data-autosubmit] select").forEach(function (sel) {
    sel.addEventListener("change", function () { sel.form.requestSubmit(); });
  });

  // Live status: <section data-poll="/url.json" data-poll-ms="1000">; the JSON's fields fill [data-field] nodes.
  document.querySelectorAll("[data-poll]").forEach(function (box) {
    var url = box.getAttribute("data-poll");
    var ms = parseInt(box.getAttribute("data-poll-ms") || "1500", 10);
    var tick = function () {
      fetch(url, { headers: { "Accept": "application/json" } }).then(function (r) { return r.json(); }).then(function (data) {
        box.querySelectorAll("[data-field]").forEach(function (node) {
          var v = data[node.getAttribute("data-field")];
          if (v !== undefined && v !== null) node.textContent = v;
        });
        var bar = box.querySelector(".progress > span");
        if (bar && typeof data.percent === "number") bar.style.width = data.percent + "%";
        if (data.href) {
          var link = box.querySelector("[data-href]");
          if (link) { link.href = data.href; link.hidden = false; }
        }
        box.setAttribute("data-state", data.state || "");
        if (!data.final) setTimeout(tick, ms);
        else if (box.hasAttribute("data-reload-when-final")) window.location.reload();
      }).catch(function () { setTimeout(tick, ms * 2); });
    };
    setTimeout(tick, ms);
  });
})();
