const val = (el) => {
    const t = String(el.type || "").toLowerCase();
    if (el.tagName === "SELECT") return Array.from(el.options).map((o) => (o.selected ? "1" : "0")).join("");
    if (t === "checkbox" || t === "radio") return el.checked ? "1" : "0";
    if (t === "file") return String(el.files ? el.files.length : 0);
    return String(el.value);
  };
