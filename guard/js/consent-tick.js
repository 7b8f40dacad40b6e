(el) => {
  const state = () => { const aria = el.getAttribute && (el.getAttribute("aria-checked") || el.getAttribute("aria-pressed")); return typeof el.checked === "boolean" ? el.checked : aria === "true"; };
  if (!state()) el.click();
  return { ticked: !!state(), connected: !!el.isConnected };
}
