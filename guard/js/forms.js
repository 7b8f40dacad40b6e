(() => {
  // Runs in the guard's isolated world (guard/devtools): the prototypes here are the
  // browser's own, whatever the page did to its world. Lists every form of this frame and
  // of its open shadow roots with its real action, method and control names, and one entry
  // per submit button that overrides them (formaction, formmethod).
  const get = (C, p) => Object.getOwnPropertyDescriptor(C.prototype, p).get;
  const fAction = get(HTMLFormElement, "action"), fMethod = get(HTMLFormElement, "method"), fElements = get(HTMLFormElement, "elements");
  const bAction = get(HTMLButtonElement, "formAction"), bMethod = get(HTMLButtonElement, "formMethod");
  const iAction = get(HTMLInputElement, "formAction"), iMethod = get(HTMLInputElement, "formMethod");
  const attr = Element.prototype.getAttribute, hasAttr = Element.prototype.hasAttribute;
  const qsa = Element.prototype.querySelectorAll, dqsa = Document.prototype.querySelectorAll, fqsa = DocumentFragment.prototype.querySelectorAll;
  const shadow = get(Element, "shadowRoot");
  const out = [];
  const all = (root, sel) => root.nodeType === 9 ? dqsa.call(root, sel) : root.nodeType === 11 ? fqsa.call(root, sel) : qsa.call(root, sel);
  const visit = (root, depth) => {
    if (depth > 20 || out.length >= 200) return;
    for (const f of all(root, "form")) {
      if (out.length >= 200) break;
      const names = [];
      for (const el of fElements.call(f)) {
        const n = attr.call(el, "name");
        if (n && names.length < 200 && !names.includes(n)) names.push(n);
      }
      out.push({ action: String(fAction.call(f)), method: String(fMethod.call(f)), fields: names });
      for (const el of fElements.call(f)) {
        if (!hasAttr.call(el, "formaction") && !hasAttr.call(el, "formmethod")) continue;
        const isB = el instanceof HTMLButtonElement;
        out.push({ action: String((isB ? bAction : iAction).call(el)), method: String((isB ? bMethod : iMethod).call(el)), fields: names });
      }
    }
    for (const el of all(root, "*")) {
      const s = shadow.call(el);
      if (s) visit(s, depth + 1);
    }
  };
  visit(document, 0);
  return out;
})()
