// The header's menu under 1024 px. Without JavaScript the "Menu" link opens the panel by
// :target (#site-menu); here it becomes a real <button aria-expanded> that toggles it.
(function () {
  "use strict";

  function setUp() {
    var menu = document.getElementById("site-menu");
    var button = document.querySelector(".menu-button");
    var link = document.querySelector(".menu-toggle-link");
    if (!menu || !button) return;
    if (link) link.remove();
    button.hidden = false;

    function setOpen(open) {
      button.setAttribute("aria-expanded", open ? "true" : "false");
      menu.classList.toggle("is-open", open);
    }

    button.addEventListener("click", function () {
      setOpen(button.getAttribute("aria-expanded") !== "true");
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && button.getAttribute("aria-expanded") === "true") {
        setOpen(false);
        button.focus();
      }
    });
    document.addEventListener("click", function (event) {
      if (button.getAttribute("aria-expanded") !== "true") return;
      if (menu.contains(event.target) || button.contains(event.target)) return;
      setOpen(false);
    });
    // Coming back through the back/forward cache: start closed.
    window.addEventListener("pageshow", function () {
      setOpen(false);
    });
    if (window.location.hash === "#site-menu") {
      history.replaceState(null, "", window.location.pathname + window.location.search);
      setOpen(true);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
