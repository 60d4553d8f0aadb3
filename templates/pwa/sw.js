// Keepsake's service worker (served at /sw.js by pwa.views.service_worker; scope: the site).
// It keeps the static shell only: the offline page, the stylesheets, the scripts, the icons.
// No page and no API answer is ever stored: they are someone's, and the next person on
// this browser must not get them. Pages go to the network; without one, the offline page.
const VERSION = "{{ version|escapejs }}";
const CACHE = "keepsake-shell-" + VERSION.length + "-" + Array.from(VERSION).reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
const SHELL = [{% for url in shell %}"{{ url|escapejs }}"{% if not forloop.last %}, {% endif %}{% endfor %}];
const OFFLINE_URL = "{{ offline_url|escapejs }}";
const STATIC_PREFIX = "{{ static_prefix|escapejs }}";

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting())
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((name) => name !== CACHE).map((name) => caches.delete(name))))
      .then(() => self.clients.claim())
  );
});

self.addEventListener("message", (event) => {
  // Signing out: nothing of this browser's session stays behind.
  if (event.data === "sign-out") {
    event.waitUntil(caches.keys().then((names) => Promise.all(names.map((name) => caches.delete(name)))));
  }
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return; // posts go straight to the network
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (request.mode === "navigate") {
    // A page: always the network's answer, never stored; the offline page without one.
    // no-store: not the browser's HTTP cache either, which would show an old page.
    event.respondWith(fetch(request, { cache: "no-store" }).catch(() => caches.match(OFFLINE_URL)));
    return;
  }
  if (url.pathname.startsWith(STATIC_PREFIX) && SHELL.includes(url.pathname)) {
    event.respondWith(caches.match(request).then((hit) => hit || fetch(request)));
  }
  // Anything else (API answers, fragments, files): the network only, never stored.
});
