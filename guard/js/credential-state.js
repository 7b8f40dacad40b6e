(el) => ({ connected: !!el.isConnected, filled: typeof el.value === "string" && el.value.length > 0 })
