// The browser test's driver (test/browser/README.md): loads each URL given in headless Chromium
// through puppeteer-core, waits until the page has set <body data-done>, and prints one JSON object
// on stdout: for each URL, {"results": {<ul id>: [its <li> texts]}, "console": [...],
// "failed_requests": [...]}. The checks are the caller's (browser_test.py).
//   node drive.cjs CHROMIUM TIMEOUT_MS URL...        (puppeteer-core found through NODE_PATH)
// Runs Chromium with --no-sandbox when run as root (its sandbox refuses root). Exits 1, with the
// reason on stderr, when the browser cannot start or a page does not finish in time.
"use strict";
const puppeteer = require("puppeteer-core");

async function load(browser, url, timeoutMs) {
  const page = await browser.newPage();
  const consoleLines = [];
  const failedRequests = [];
  page.on("console", (m) => consoleLines.push(m.type() + ": " + m.text()));
  page.on("pageerror", (e) => consoleLines.push("pageerror: " + e.message));
  page.on("requestfailed", (r) =>
    failedRequests.push(r.method() + " " + r.url() + ": " + (r.failure() || {}).errorText));
  try {
    await page.goto(url, { timeout: timeoutMs });
    await page.waitForSelector("body[data-done]", { timeout: timeoutMs });
  } catch (e) {
    throw new Error(url + ": " + e.message + "\nconsole:\n" + consoleLines.join("\n") +
                    "\nfailed requests:\n" + failedRequests.join("\n"));
  }
  const results = await page.$$eval("ul[data-result]", (lists) =>
    Object.fromEntries(lists.map((ul) =>
      [ul.id, Array.from(ul.querySelectorAll("li"), (li) => li.textContent)])));
  await page.close();
  return { results, console: consoleLines, failed_requests: failedRequests };
}

async function main() {
  const [chromium, timeoutArg, ...urls] = process.argv.slice(2);
  const timeoutMs = Number(timeoutArg);
  const args = ["--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"];
  if (process.getuid && process.getuid() === 0) args.push("--no-sandbox");
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true, args, timeout: timeoutMs,
  });
  try {
    const out = {};
    for (const url of urls) out[url] = await load(browser, url, timeoutMs);
    process.stdout.write(JSON.stringify(out) + "\n");
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  process.stderr.write("drive.cjs: " + (e && e.stack ? e.stack : String(e)) + "\n");
  process.exit(1);
});
