() => typeof window.__pabGuardLock === "function" && window.__pabGuardLock("@TOKEN@", @ON@)
