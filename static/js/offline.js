// The installable app: registers the service worker (/sw.js), and keeps quick captures typed
// while offline in this browser (IndexedDB) until they can be sent. Each capture gets a key
// when it is typed and is sent with it (Idempotency-Key), so trying again never saves it twice.
// Captures belong to the account that typed them: only that account's are shown or sent.
(function () {
  "use strict";

  var SEND_URL = "/offline/captures/";
  var USER_KEY = "keepsake-user";
  var DB_NAME = "keepsake";
  var STORE = "outbox";

  // ---- who is signed in (remembered for the offline page, forgotten on sign-out) ----
  function currentUser() {
    var meta = document.querySelector('meta[name="keepsake-user"]');
    if (meta) {
      localStorage.setItem(USER_KEY, meta.content);
      return meta.content;
    }
    if (document.body && document.body.classList.contains("offline-page")) {
      return localStorage.getItem(USER_KEY);
    }
    return null; // a signed-out page
  }

  // ---- IndexedDB: one store of captures by key ----
  function openDb() {
    return new Promise(function (resolve, reject) {
      var request = indexedDB.open(DB_NAME, 1);
      request.onupgradeneeded = function () {
        request.result.createObjectStore(STORE, { keyPath: "key" });
      };
      request.onsuccess = function () { resolve(request.result); };
      request.onerror = function () { reject(request.error); };
    });
  }

  function withStore(mode, work) {
    return openDb().then(function (db) {
      return new Promise(function (resolve, reject) {
        var transaction = db.transaction(STORE, mode);
        var result = work(transaction.objectStore(STORE));
        transaction.oncomplete = function () {
          db.close();
          resolve(result && "result" in result ? result.result : result);
        };
        transaction.onerror = function () { reject(transaction.error); };
      });
    });
  }

  function allCaptures(user) {
    return withStore("readonly", function (store) { return store.getAll(); }).then(function (items) {
      return (items || [])
        .filter(function (item) { return item.user === user; })
        .sort(function (a, b) { return a.typed_at < b.typed_at ? -1 : 1; });
    });
  }

  function putCapture(item) {
    return withStore("readwrite", function (store) { store.put(item); });
  }

  function dropCapture(key) {
    return withStore("readwrite", function (store) { store.delete(key); });
  }

  // ---- the outbox, above the capture form ----
  var STATES = {
    waiting: "Waiting to send",
    sending: "Sending…",
    "needs-you": "Needs you",
    refused: "Not sent",
  };

  function outboxElement() {
    var form = document.getElementById("quick-add");
    if (!form) return null;
    var box = document.getElementById("outbox");
    if (!box) {
      box = document.createElement("section");
      box.id = "outbox";
      box.className = "outbox";
      box.setAttribute("aria-live", "polite");
      box.setAttribute("aria-labelledby", "outbox-title");
      box.hidden = true;
      form.parentNode.insertBefore(box, form);
    }
    return box;
  }

  function render(user) {
    var box = outboxElement();
    if (!box || !user) return Promise.resolve();
    return allCaptures(user).then(function (items) {
      box.textContent = "";
      box.hidden = items.length === 0;
      if (!items.length) return;
      var title = document.createElement("h2");
      title.id = "outbox-title";
      title.textContent = items.length === 1 ? "1 capture kept in this browser" : items.length + " captures kept in this browser";
      var help = document.createElement("p");
      help.className = "small muted";
      help.textContent = "Sent to your journal as soon as you are online.";
      var list = document.createElement("ul");
      items.forEach(function (item) {
        var row = document.createElement("li");
        row.className = "outbox-item";
        row.dataset.key = item.key;
        row.dataset.state = item.state;
        var text = document.createElement("span");
        text.className = "outbox-text";
        text.textContent = item.body.length > 120 ? item.body.slice(0, 119) + "…" : item.body;
        var state = document.createElement("span");
        state.className = "outbox-state";
        state.textContent = STATES[item.state] || STATES.waiting;
        row.appendChild(text);
        row.appendChild(state);
        if (item.detail) {
          var detail = document.createElement("span");
          detail.className = "small outbox-detail";
          detail.textContent = item.detail;
          row.appendChild(detail);
        }
        if (item.state === "needs-you" || item.state === "refused") {
          var back = document.createElement("button");
          back.type = "button";
          back.className = "link-button small";
          back.textContent = "Put it back in the form";
          back.addEventListener("click", function () {
            var field = document.querySelector("#quick-add textarea");
            if (field) {
              field.value = item.body;
              field.focus();
            }
            dropCapture(item.key).then(function () { render(user); });
          });
          row.appendChild(back);
        }
        list.appendChild(row);
      });
      box.appendChild(title);
      box.appendChild(help);
      box.appendChild(list);
    });
  }

  // ---- sending ----
  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) return decodeURIComponent(match[1]);
    var field = document.querySelector('input[name="csrfmiddlewaretoken"]');
    return field ? field.value : "";
  }

  var flushing = false;

  function flush(user) {
    if (!user || flushing || !navigator.onLine) return Promise.resolve(0);
    flushing = true;
    var sent = 0;
    return allCaptures(user)
      .then(function (items) {
        var chain = Promise.resolve();
        items
          .filter(function (item) { return item.state === "waiting" || item.state === "sending"; })
          .forEach(function (item) {
            chain = chain.then(function () {
              var data = new FormData();
              data.append("body", item.body);
              data.append("typed_at", item.typed_at);
              return fetch(SEND_URL, {
                method: "POST",
                body: data,
                credentials: "same-origin",
                headers: { "Idempotency-Key": item.key, "X-CSRFToken": csrfToken(), Accept: "application/json" },
              })
                .then(function (response) {
                  if (response.status === 200 || response.status === 201) {
                    sent += 1;
                    return dropCapture(item.key);
                  }
                  if (response.status === 409 || response.status === 400) {
                    return response.json().then(function (answer) {
                      item.state = response.status === 409 ? "needs-you" : "refused";
                      item.detail = answer.detail || "";
                      return putCapture(item);
                    });
                  }
                  return null; // signed out, or the server is busy: try again later
                })
                .catch(function () { return null; }); // the network again: try again later
            });
          });
        return chain;
      })
      .then(function () {
        flushing = false;
        return render(user).then(function () { return sent; });
      });
  }

  function keep(user, body) {
    var item = {
      key: crypto.randomUUID(),
      user: user,
      body: body,
      typed_at: new Date().toISOString(),
      state: "waiting",
    };
    return putCapture(item).then(function () { return render(user); });
  }

  // ---- wiring ----
  function setUp() {
    var user = currentUser();

    if ("serviceWorker" in navigator && user) {
      navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(function () {});
    }

    // Signing out: the shell's caches and who was signed in go; the worker drops its caches too.
    document.addEventListener("submit", function (event) {
      if (!event.target.matches("[data-sign-out]")) return;
      localStorage.removeItem(USER_KEY);
      if (navigator.serviceWorker && navigator.serviceWorker.controller) {
        navigator.serviceWorker.controller.postMessage("sign-out");
      }
      if (window.caches) {
        caches.keys().then(function (names) { names.forEach(function (name) { caches.delete(name); }); });
      }
    });

    if (!user || !window.indexedDB) return;

    // Quick capture with no network: kept here instead (before htmx sees the submit).
    document.addEventListener(
      "submit",
      function (event) {
        var form = event.target;
        if (form.id !== "quick-add") return;
        var offlinePage = form.hasAttribute("data-offline-capture");
        if (navigator.onLine && !offlinePage) return;
        var field = form.querySelector("textarea[name=body]");
        var body = field ? field.value.trim() : "";
        event.preventDefault();
        event.stopPropagation();
        if (!body) return;
        keep(user, body).then(function () {
          field.value = "";
          return flush(user);
        });
      },
      true
    );

    function sendWaiting() {
      flush(user).then(function (sent) {
        var field = document.querySelector("#quick-add textarea");
        // The timeline shows what was sent (unless something is being typed).
        if (sent && window.location.pathname === "/" && !(field && field.value.trim())) window.location.reload();
      });
    }
    window.addEventListener("online", sendWaiting);
    // Not every browser says when the network is back (Chromium's emulated offline mode
    // changes navigator.onLine without an "online" event): while captures wait in the
    // outbox, look every two seconds too.
    window.setInterval(function () {
      var waiting = document.querySelector(
        '#outbox [data-state="waiting"], #outbox [data-state="sending"]'
      );
      if (waiting && navigator.onLine && !flushing) sendWaiting();
    }, 2000);
    render(user)
      .then(function () { return flush(user); })
      .then(function (sent) {
        var field = document.querySelector("#quick-add textarea");
        if (sent && window.location.pathname === "/" && !(field && field.value.trim())) window.location.reload();
      });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
