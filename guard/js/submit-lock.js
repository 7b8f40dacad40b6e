(() => {
  if (window.__pabGuardLock) return;
  const token = "@TOKEN@";
  let armed = false;
  let blocked = 0;
  const refuse = (what) => { blocked++; return new Error("pab guard: " + what + " refused (a submit needs the owner's approval)"); };
  const def = (name, fn) => Object.defineProperty(window, name, { value: fn, writable: false, configurable: false, enumerable: false });
  def("__pabGuardLock", (t, on) => { if (t === token) armed = !!on; return armed; });
  def("__pabGuardTake", () => { const n = blocked; blocked = 0; return n; });
  // GETs carrying a value typed in this run: the guard gives [length, hash] pairs of the
  // typed values (canonical form, FNV-1a over code points), never the values themselves
  let typed = [];
  let leaked = 0;
  def("__pabGuardTyped", (t, list) => { if (t === token && Array.isArray(list)) typed = list.filter((x) => Array.isArray(x) && x.length === 2).slice(0, 1000); return typed.length; });
  def("__pabGuardTakeLeaks", () => { const n = leaked; leaked = 0; return n; });
  const canon = (s) => {
    s = String(s);
    for (let i = 0; i < 3; i++) { let d; try { d = decodeURIComponent(s.replace(/\+/g, " ")); } catch (e) { break; } if (d === s) break; s = d; }
    return s.normalize("NFKC").toLowerCase().replace(/\s+/g, " ");
  };
  const carries = (u) => {
    if (!typed.length || u === undefined || u === null) return false;
    let cps;
    try { cps = Array.from(canon(u)).slice(0, 8192).map((c) => c.codePointAt(0)); } catch (e) { return false; }
    for (const [len, hash] of typed) {
      for (let i = 0; i + len <= cps.length; i++) {
        let h = 0x811c9dc5;
        for (let j = i; j < i + len; j++) { h ^= cps[j]; h = Math.imul(h, 16777619); }
        if ((h >>> 0) === hash) return true;
      }
    }
    return false;
  };
  const leaks = (u) => { if (!armed && carries(u)) { leaked++; return true; } return false; };
  for (const [C, attr] of [[window.HTMLImageElement, "src"], [window.HTMLScriptElement, "src"], [window.HTMLIFrameElement, "src"], [window.HTMLSourceElement, "src"], [window.HTMLLinkElement, "href"], [window.HTMLEmbedElement, "src"], [window.HTMLMediaElement, "src"]]) {
    const d = C && Object.getOwnPropertyDescriptor(C.prototype, attr);
    if (!d || !d.set) continue;
    Object.defineProperty(C.prototype, attr, { configurable: true, enumerable: d.enumerable, get() { return d.get.call(this); }, set(v) { if (leaks(v)) return; d.set.call(this, v); } });
  }
  const setAttr = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (n, v) { if (/^(src|href|srcset|action|data|poster|background)$/i.test(String(n)) && leaks(v)) return; return setAttr.apply(this, arguments); };
  const open1 = window.open;
  if (open1) window.open = function (u) { if (leaks(u)) return null; return open1.apply(this, arguments); };
  const F = HTMLFormElement.prototype;
  const submit = F.submit, requestSubmit = F.requestSubmit, getAttr = Element.prototype.getAttribute;
  // a GET (or dialog) form only navigates; a POST one sends the application
  const posts = (form, by) => {
    const m = (by && by.hasAttribute && by.hasAttribute("formmethod")) ? getAttr.call(by, "formmethod") : getAttr.call(form, "method");
    return String(m || "get").toLowerCase() === "post";
  };
  F.submit = function () { if (!armed && posts(this)) throw refuse("form.submit()"); return submit.apply(this, arguments); };
  F.requestSubmit = function (by) { if (!armed && posts(this, by)) throw refuse("form.requestSubmit()"); return requestSubmit.apply(this, arguments); };
  window.addEventListener("submit", (ev) => { if (!armed && ev.target instanceof HTMLFormElement && posts(ev.target, ev.submitter)) { ev.preventDefault(); ev.stopImmediatePropagation(); blocked++; } }, true);
  const safe = (m) => { m = String(m || "GET").toUpperCase(); return m === "GET" || m === "HEAD"; };
  const fetch0 = window.fetch;
  if (fetch0) window.fetch = function (input, init) {
    const m = (init && init.method) || (input && typeof input === "object" && input.method) || "GET";
    if (!armed && !safe(m)) return Promise.reject(refuse("fetch " + m));
    if (leaks(input && typeof input === "object" && input.url ? input.url : input)) return Promise.reject(new Error("pab guard: a request carrying typed data refused"));
    return fetch0.apply(this, arguments);
  };
  const X = XMLHttpRequest.prototype, open0 = X.open, send0 = X.send;
  X.open = function (m, u) { this.__pabMethod = m; this.__pabLeak = leaks(u); return open0.apply(this, arguments); };
  X.send = function () {
    if (!armed && !safe(this.__pabMethod)) throw refuse("XMLHttpRequest " + this.__pabMethod);
    if (this.__pabLeak) throw new Error("pab guard: a request carrying typed data refused");
    return send0.apply(this, arguments);
  };
  if (navigator.sendBeacon) { const b0 = navigator.sendBeacon.bind(navigator); navigator.sendBeacon = function () { if (!armed) { blocked++; return false; } return b0.apply(null, arguments); }; }
})();
