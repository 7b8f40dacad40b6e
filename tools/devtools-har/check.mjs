// check.mjs: loads HAR files with Chromium DevTools' own HAR importer, as its Network panel
// does for "Import HAR file" (front_end/panels/network/NetworkLogView.ts):
//   harRoot = new HAR.HARFormat.HARRoot(JSON.parse(text));
//   requests = HAR.Importer.Importer.requestsFromHARLog(harRoot.log);
// The two modules, front_end/models/har/HARFormat.ts and Importer.ts, and everything they
// import (the SDK's NetworkRequest, Cookie, PageLoad, TextUtils, Common, Platform, i18n...)
// are bundled by esbuild, unchanged, from the npm package chrome-devtools-frontend pinned in
// package-lock.json. The one module stubbed is core/i18n/locales.js, which DevTools' build
// generates (generate-locales-js.js) and the package does not ship: here its only locale is
// en-US.
//
// Prints one JSON line per file:
//   {"file": F, "error": "", "version": "1.2", "pages": N, "entries": N,
//    "entryErrors": [{"index": i, "url": U, "error": E}, ...],
//    "requests": [{"method", "url", "status", "mimeType", "resourceType", "protocol",
//                  "formData", "bodySHA256", "bodyLength", "contentError"}, ...]}
// "error" is what DevTools would report ("Failed to load HAR file with following error:
// E"), empty when the file loads. When HARRoot throws, every entry is also parsed on its own
// with HAREntry, so "entryErrors" names each entry DevTools refuses. "requests" are the
// DevTools NetworkRequests the importer built, in its order (sorted by startedDateTime), with
// the response body as DevTools would show it (its SHA-256 in hex and length in bytes).
// Usage: node check.mjs FILE.har...
import * as esbuild from "esbuild";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import url from "node:url";

const here = path.dirname(url.fileURLToPath(import.meta.url));
const frontEnd = path.join(here, "node_modules", "chrome-devtools-frontend", "front_end");
const locales = `export const LOCALES = ['en-US'];
export const BUNDLED_LOCALES = ['en-US'];
export const DEFAULT_LOCALE = 'en-US';
export const REMOTE_FETCH_PATTERN = '';
export const LOCAL_FETCH_PATTERN = '';`;

async function loadDevTools() {
  const entry = [
    `export * as HARFormat from ${JSON.stringify(path.join(frontEnd, "models/har/HARFormat.js"))};`,
    `export * as Importer from ${JSON.stringify(path.join(frontEnd, "models/har/Importer.js"))};`,
  ].join("\n");
  const result = await esbuild.build({
    stdin: { contents: entry, resolveDir: here, loader: "js" },
    bundle: true,
    format: "esm",
    platform: "node",
    write: false,
    logLevel: "silent",
    plugins: [{
      name: "generated-locales",
      setup(build) {
        build.onResolve({ filter: /^\.\/locales\.js$/ }, (args) =>
          path.basename(args.resolveDir) === "i18n" ? { path: "locales.js", namespace: "generated" } : undefined);
        build.onLoad({ filter: /.*/, namespace: "generated" }, () => ({ contents: locales, loader: "js" }));
      },
    }],
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pab-devtools-har-"));
  try {
    const file = path.join(dir, "devtools-har.mjs");
    fs.writeFileSync(file, result.outputFiles[0].contents);
    return await import(url.pathToFileURL(file).href);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function check(devtools, file) {
  const { HARFormat, Importer } = devtools;
  const out = { file, error: "", version: "", pages: 0, entries: 0, entryErrors: [], requests: [] };
  let json;
  try {
    json = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (err) {
    out.error = String(err);
    return out;
  }
  let root;
  try {
    root = new HARFormat.HARRoot(json);
  } catch (err) {
    out.error = String(err);
    const entries = json && json.log && Array.isArray(json.log.entries) ? json.log.entries : [];
    entries.forEach((data, index) => {
      try {
        new HARFormat.HAREntry(data);
      } catch (err) {
        const u = data && data.request && typeof data.request === "object" ? String(data.request.url) : "";
        out.entryErrors.push({ index, url: u, error: String(err) });
      }
    });
    return out;
  }
  out.version = root.log.version;
  out.pages = root.log.pages.length;
  out.entries = root.log.entries.length;
  let requests;
  try {
    requests = Importer.Importer.requestsFromHARLog(root.log);
  } catch (err) {
    out.error = "Importer.requestsFromHARLog: " + String(err);
    return out;
  }
  for (const r of requests) {
    const req = {
      method: r.requestMethod, url: r.url(), status: r.statusCode, mimeType: r.mimeType,
      resourceType: r.resourceType().name(), protocol: r.protocol, formData: await r.requestFormData(),
      bodySHA256: "", bodyLength: 0, contentError: "",
    };
    try {
      const cd = await r.requestContentData();
      if ("error" in cd) {
        req.contentError = String(cd.error);
      } else {
        const bytes = cd.createdFromBase64 ? Buffer.from(cd.base64, "base64") : Buffer.from(cd.text, "utf8");
        req.bodyLength = bytes.length;
        req.bodySHA256 = crypto.createHash("sha256").update(bytes).digest("hex");
      }
    } catch (err) {
      req.contentError = String(err);
    }
    out.requests.push(req);
  }
  return out;
}

const devtools = await loadDevTools();
for (const file of process.argv.slice(2)) {
  process.stdout.write(JSON.stringify(await check(devtools, file)) + "\n");
}
