() => typeof window.__pabGuardTyped === "function" && window.__pabGuardTyped("@TOKEN@", @LIST@)
