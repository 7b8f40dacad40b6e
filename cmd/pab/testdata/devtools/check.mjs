// check.mjs (pab's own): loads HAR files as Chromium DevTools' Network panel does when a
// HAR is dropped on it or opened with "Import HAR file" (NetworkLogView.ts:
// `new HAR.HARFormat.HARRoot(JSON.parse(text))`), with DevTools' own HARFormat (the copy
// HARFormat.mjs beside this file, see SOURCES.md), and prints one JSON line per file:
//   {"file": F, "error": "", "version": "1.2", "pages": N, "entries": N,
//    "urls": [...], "entryErrors": [{"index": i, "url": U, "error": E}, ...]}
// "error" is what DevTools would show ("Failed to load HAR file with following error: E")
// and empty when the file loads. When HARRoot throws, every entry is also parsed on its
// own with HAREntry, so "entryErrors" names each entry DevTools refuses.
// Usage: node check.mjs FILE.har...
import fs from "node:fs";
import { HARRoot, HAREntry } from "./HARFormat.mjs";

function check(file) {
  const out = { file, error: "", version: "", pages: 0, entries: 0, urls: [], entryErrors: [] };
  let json;
  try {
    json = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (err) {
    out.error = String(err);
    return out;
  }
  try {
    const root = new HARRoot(json);
    out.version = root.log.version;
    out.pages = root.log.pages.length;
    out.entries = root.log.entries.length;
    out.urls = root.log.entries.map((e) => e.request.url);
  } catch (err) {
    out.error = String(err);
    const entries = json && json.log && Array.isArray(json.log.entries) ? json.log.entries : [];
    entries.forEach((data, index) => {
      try {
        new HAREntry(data);
      } catch (err) {
        const url = data && data.request && typeof data.request === "object" ? String(data.request.url) : "";
        out.entryErrors.push({ index, url, error: String(err) });
      }
    });
  }
  return out;
}

for (const file of process.argv.slice(2)) {
  process.stdout.write(JSON.stringify(check(file)) + "\n");
}
