// pw.cjs: what cmd/pab/har_test.go asks of Playwright (playwright-core from
// tools/playwright-mcp/node_modules, with Debian's /usr/bin/chromium):
//
//   node pw.cjs record OUT.har|OUT.zip ORIGIN RESOLVE
//     records a HAR (recordHar, mode full; a .zip name attaches the bodies) of a visit to
//     ORIGIN: the home page (JSON API, image), a form POST, a multipart upload, a gzip and
//     a brotli page. RESOLVE is Chromium's --host-resolver-rules.
//   node pw.cjs browse PROXY ORIGIN
//     the same visit without recordHar, through the HTTP proxy PROXY (host:port; loopback
//     too), ignoring certificate errors: mitmproxy's har_dump writes the HAR.
//   node pw.cjs serve HAR URLS.json RESOLVE
//     opens each URL of URLS.json in a page routed from HAR (routeFromHAR, notFound
//     'fallback': what the HAR lacks goes to the network, which RESOLVE maps to a 404
//     server) and prints one JSON line per URL: {url, status, body (base64), error}.
const path = require('path');
const { chromium } = require(process.env.PW_CORE || path.join(__dirname, '../../../../tools/playwright-mcp/node_modules/playwright-core'));

async function launch(resolve, proxy) {
  const args = ['--disable-quic'];
  if (resolve) args.push('--host-resolver-rules=' + resolve);
  if (process.getuid && process.getuid() === 0) args.push('--no-sandbox');
  const opts = { executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args };
  if (proxy) opts.proxy = { server: 'http://' + proxy, bypass: '<-loopback>' };
  return chromium.launch(opts);
}

async function record(out, origin, resolve, proxy) {
  const browser = await launch(resolve, proxy);
  const opts = { ignoreHTTPSErrors: true, locale: 'de-CH', timezoneId: 'Europe/Zurich' };
  if (out) opts.recordHar = { path: out, mode: 'full' };
  const ctx = await browser.newContext(opts);
  const page = await ctx.newPage();
  await page.goto(origin + '/');
  await page.waitForSelector('#items li');
  await page.waitForFunction(() => document.querySelector('#logo').complete);
  for (const id of [1, 2, 3]) {
    await page.goto(origin + '/p/' + id);
    await page.waitForSelector('#price');
  }
  await page.goto(origin + '/form');
  await page.fill('#name', 'Ada Lovelace');
  await Promise.all([page.waitForURL('**/thanks'), page.click('#send')]);
  await page.goto(origin + '/upload');
  await page.setInputFiles('#file', { name: 'note.txt', mimeType: 'text/plain', buffer: Buffer.from('hello upload\n') });
  await Promise.all([page.waitForURL('**/uploaded'), page.click('#send')]);
  await page.goto(origin + '/gz');
  await page.goto(origin + '/br');
  await ctx.close();
  await browser.close();
}

async function serve(har, urlsFile, resolve) {
  const urls = JSON.parse(require('fs').readFileSync(urlsFile, 'utf8'));
  const browser = await launch(resolve);
  const ctx = await browser.newContext({ ignoreHTTPSErrors: true });
  await ctx.routeFromHAR(har, { notFound: 'fallback' });
  const page = await ctx.newPage();
  for (const url of urls) {
    let status = 0, body = '', error;
    try {
      const resp = await page.goto(url);
      status = resp ? resp.status() : 0;
      body = resp ? (await resp.body()).toString('base64') : '';
    } catch (e) {
      error = e.message.split('\n')[0];
    }
    process.stdout.write(JSON.stringify({ url, status, body, error }) + '\n');
  }
  await browser.close();
}

const [mode, a, b, c] = process.argv.slice(2);
const run = { record: () => record(a, b, c), browse: () => record('', b, '', a), serve: () => serve(a, b, c) }[mode];
run().catch((e) => {
  console.error(e);
  process.exit(1);
});
