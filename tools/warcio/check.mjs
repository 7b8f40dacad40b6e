// check.mjs: reads WARC files with warcio.js (the npm package warcio, a peer's parser)
// and prints one JSON line per file:
//   {"file": F, "records": N, "types": {"response": n, ...}, "warnings": [...],
//    "index": ["<CDXJ line>", ...]}
// "warnings" collects everything warcio.js reports through console.warn or console.log
// while it parses, and any exception. "index" is warcio.js's own CDXJ index of the file
// (CDXIndexer, format cdxj), so a test can compare pab's index with a peer's.
// Usage: node check.mjs FILE.warc[.gz]...
import fs from "node:fs";
import { WARCParser, CDXIndexer } from "warcio";

const warnings = [];
for (const name of ["warn", "log", "error"]) {
  console[name] = (...args) => warnings.push(args.map(String).join(" "));
}

async function check(file) {
  const out = { file, records: 0, types: {}, warnings: [], index: [] };
  warnings.length = 0;
  try {
    const parser = new WARCParser(fs.createReadStream(file));
    for await (const record of parser) {
      await record.readFully(false);
      out.records++;
      out.types[record.warcType] = (out.types[record.warcType] || 0) + 1;
    }
    const indexer = new CDXIndexer({ format: "cdxj" });
    for await (const entry of indexer.iterIndex([{ filename: file, reader: fs.createReadStream(file) }])) {
      out.index.push(indexer.serializeCDXJ(entry).trimEnd());
    }
  } catch (err) {
    warnings.push("exception: " + (err && err.stack ? err.stack.split("\n")[0] : String(err)));
  }
  out.warnings = warnings.slice();
  return out;
}

for (const file of process.argv.slice(2)) {
  process.stdout.write(JSON.stringify(await check(file)) + "\n");
}
