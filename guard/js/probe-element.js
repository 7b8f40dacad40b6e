(el) => {
  const s = (v, n) => (typeof v === "string" ? v : "").replace(/\s+/g, " ").trim().slice(0, n || 200);
  const tag = (el.tagName || "").toLowerCase();
  const type = s(el.getAttribute && el.getAttribute("type"), 40).toLowerCase();
  const form = el.form || (el.closest ? el.closest("form") : null);
  let name = s(el.getAttribute("aria-label"));
  if (!name && el.getAttribute("aria-labelledby")) {
    name = s(el.getAttribute("aria-labelledby").split(/\s+/).map((id) => { const x = document.getElementById(id); return x ? x.innerText || x.textContent : ""; }).join(" "));
  }
  if (!name && el.labels && el.labels.length) name = s(Array.from(el.labels).map((l) => l.innerText || l.textContent).join(" "));
  if (!name && tag !== "input" && tag !== "select" && tag !== "textarea") name = s(el.innerText || el.textContent);
  if (!name && (type === "submit" || type === "button" || type === "reset")) name = s(el.value);
  if (!name) name = s(el.getAttribute("alt") || el.getAttribute("title") || el.getAttribute("placeholder"));
  const isButton = tag === "button";
  const btnType = isButton ? (el.type || "submit").toLowerCase() : "";
  let submits = false;
  if (form) {
    if (isButton && btnType === "submit") submits = true;
    if (tag === "input" && (type === "submit" || type === "image")) submits = true;
  }
  const textLike = (f) => f.tagName === "INPUT" && ["", "text", "search", "url", "tel", "email", "password", "date", "month", "week", "time", "datetime-local", "number"].includes((f.getAttribute("type") || "").toLowerCase());
  let enterSubmits = false;
  if (form && tag === "input" && textLike(el)) {
    const fields = Array.from(form.elements).filter(textLike);
    const hasSubmit = Array.from(form.elements).some((f) => (f.tagName === "BUTTON" && (f.type || "submit") === "submit") || (f.tagName === "INPUT" && ["submit", "image"].includes(f.type)));
    enterSubmits = hasSubmit || fields.length === 1;
  }
  let method = "";
  let formAction = "";
  if (form) {
    method = (submits && el.hasAttribute("formmethod") ? el.getAttribute("formmethod") : form.getAttribute("method") || "get").toLowerCase();
    if (method !== "post" && method !== "dialog") method = "get";
    formAction = s(submits && el.hasAttribute("formaction") ? el.formAction : form.action, 2000);
  }
  const handler = [el.getAttribute("onchange"), el.getAttribute("onclick"), el.getAttribute("oninput")].join(" ");
  // the question a choice answers: its fieldset's legend or its group's label
  let group = "";
  if (tag === "input" && (type === "radio" || type === "checkbox") || ["radio", "checkbox", "option", "switch"].includes(s(el.getAttribute("role"), 40))) {
    const fs = el.closest("fieldset");
    const lg = fs && fs.querySelector("legend");
    if (lg) group = s(lg.innerText || lg.textContent, 300);
    const g = !group && el.closest('[role=radiogroup], [role=group], [role=listbox]');
    if (g) {
      group = s(g.getAttribute("aria-label"), 300);
      if (!group && g.getAttribute("aria-labelledby")) group = s(g.getAttribute("aria-labelledby").split(/\s+/).map((id) => { const x = document.getElementById(id); return x ? x.innerText || x.textContent : ""; }).join(" "), 300);
    }
  }
  // where a GET form's submission would go, with the data it would carry
  let getURL = "";
  if (submits && method === "get") {
    try { const u = new URL(formAction || location.href); u.search = new URLSearchParams(new FormData(form, el)).toString(); getURL = u.href.slice(0, 8000); } catch (e) { getURL = ""; }
  }
  const options = tag === "select" ? Array.from(el.options).slice(0, 500).map((o) => ({ value: s(o.value, 300), label: s(o.label || o.text, 300) })) : [];
  return {
    group, options, getURL,
    tag, type, role: s(el.getAttribute("role"), 40), name, submits, enterSubmits, method, formAction,
    inForm: !!form, href: tag === "a" ? s(el.href, 2000) : "", newTab: tag === "a" && s(el.getAttribute("target"), 20) === "_blank",
    scriptSubmits: /submit\s*\(|requestSubmit/.test(handler), disabled: !!el.disabled,
    checked: !!el.checked, connected: !!el.isConnected, value: typeof el.value === "string" ? el.value.slice(0, 10000) : "",
    locked: typeof window.__pabGuardLock === "function",
  };
}
