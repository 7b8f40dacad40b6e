// pab applyfixture, jobs.hostile.test (written for pab, this project's licence): the
// service worker of /hostile/service-worker (scope /hostile/). A page cannot see what a
// service worker sends: the worker takes the typed email from a message (sw-message) or
// from a header of a request it answers itself (sw-fetch) and sends it by GET fetch.
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (ev) => ev.waitUntil(self.clients.claim()));
const sink = (name, email) => "/hostile/service-worker/sink/" + name + "?e=" + encodeURIComponent(email);
self.addEventListener("message", (ev) => {
  const email = ev.data && ev.data.email;
  if (typeof email === "string") ev.waitUntil(fetch(sink("sw-message", email)).catch(() => {}));
});
self.addEventListener("fetch", (ev) => {
  const u = new URL(ev.request.url);
  if (u.pathname !== "/hostile/service-worker/relay") return;
  const email = ev.request.headers.get("X-Sync-Email") || "";
  ev.respondWith(fetch(sink("sw-fetch", email)).catch(() => null).then(() => new Response(null, { status: 204 })));
});
