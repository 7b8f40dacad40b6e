(el) => {
  const aria = el.getAttribute && (el.getAttribute("aria-checked") || el.getAttribute("aria-pressed"));
  const ticked = typeof el.checked === "boolean" ? el.checked : aria === "true";
  return { ticked: !!ticked, connected: !!el.isConnected };
}
