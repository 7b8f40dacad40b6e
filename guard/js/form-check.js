() => {
  /* form-value.js */
  const snap = window.__pabFormSnap;
  if (!snap) return { changed: [], missing: true, origin: performance.timeOrigin };
  window.__pabFormSnap = undefined;
  const s = (v) => (typeof v === "string" ? v : "").replace(/\s+/g, " ").trim().slice(0, 200);
  // a label's own words: a label wrapping its control holds the control's text too (a select's options)
  const own = (l) => { const c = l.cloneNode(true); c.querySelectorAll("select, input, textarea, option").forEach((x) => x.remove()); return c.textContent; };
  const label = (el) => s(el.getAttribute("aria-label")) || s(el.labels && el.labels.length ? Array.from(el.labels).map(own).join(" ") : "") ||
    s(el.getAttribute("placeholder")) || s(el.getAttribute("name")) || s(el.id) || el.tagName.toLowerCase();
  const changed = [];
  const restore = (el, old) => {
    const t = String(el.type || "").toLowerCase();
    if (el.tagName === "SELECT") Array.from(el.options).forEach((o, i) => { o.selected = old[i] === "1"; });
    else if (t === "checkbox" || t === "radio") el.checked = old === "1";
    else if (t !== "file") { const d = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), "value"); if (d && d.set) d.set.call(el, old); else el.value = old; }
    el.dispatchEvent(new Event("input", { bubbles: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
  };
  snap.els.forEach((el, i) => {
    if (!el.isConnected || val(el) === snap.vals[i] || (snap.own && snap.own.has(el))) return;
    changed.push({ el, old: snap.vals[i] });
  });
  changed.forEach((c) => restore(c.el, c.old));
  return { changed: changed.slice(0, 20).map((c) => label(c.el)) };
}
