// Drives Debian's chromium (playwright-core: no browser download) through stackwatch's page, and prints one JSON
// object with what a user would have seen. Called by tests/integration/test_web.py with one JSON argument:
// { base, read_token, capture_token, pid, hostile_comm, out, user_data_dir }.
'use strict';
const { chromium } = require('playwright-core');
const path = require('path');

// page.waitForFunction() evaluates a string, which the page's CSP (rightly) refuses: poll with evaluate() instead.
async function waitFor(page, fn, arg, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await page.evaluate(fn, arg)) return;
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + fn.toString());
    await new Promise(r => setTimeout(r, 100));
  }
}

const cfg = JSON.parse(process.argv[2]);
const result = { console_errors: [], failed_requests: [], dialogs: [], steps: {} };

async function main() {
  const context = await chromium.launchPersistentContext(cfg.user_data_dir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
  try {
    const page = context.pages()[0] || await context.newPage();
    let phase = 'load';
    page.on('console', m => { if (m.type() === 'error') result.console_errors.push({ phase, text: m.text() }); });
    page.on('requestfailed', r => result.failed_requests.push({ phase, url: r.url(), error: r.failure()?.errorText }));
    page.on('response', r => { if (r.status() >= 400) result.failed_requests.push({ phase, url: r.url(), status: r.status() }); });
    page.on('dialog', d => { result.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
    const shot = name => page.screenshot({ path: path.join(cfg.out, name + '.png'), fullPage: true });

    // Now, with the read token in the fragment: the hung thread appears, named as text.
    const t0 = Date.now();
    const resp = await page.goto(cfg.base + '/#token=' + encodeURIComponent(cfg.read_token));
    result.steps.page = { status: resp.status(), headers: resp.headers() };
    const row = page.locator('#now-table tr.now-thread', { hasText: cfg.hostile_comm });
    await row.first().waitFor({ timeout: 20000 });
    result.steps.now = {
      seconds: (Date.now() - t0) / 1000,
      seconds_since_hang: (Date.now() - cfg.started_ms) / 1000,
      url: page.url(),
      token_in_storage: await page.evaluate(() => sessionStorage.getItem('stackwatch-token')),
      comm_text: await row.first().locator('td.comm').textContent(),
      injected: await page.evaluate(() => document.querySelectorAll('main img, main b, #health img').length),
      health: await page.locator('#health').textContent(),
    };
    // Still refreshing: the "refreshed" stamp changes without a reload.
    const stamp = await page.locator('#now-stamp').textContent();
    await waitFor(page, s => document.getElementById('now-stamp').textContent !== s, stamp, 10000);
    result.steps.now.refreshed = true;
    await shot('now');

    // The archive, and the snapshot of the hung process.
    phase = 'snapshots';
    await page.goto(cfg.base + '/#/snapshots?pid=' + cfg.pid);
    await page.locator('#snapshots-table a.snap').first().waitFor({ timeout: 10000 });
    result.steps.snapshots = { rows: await page.locator('#snapshots-table tbody tr').count() };
    await shot('snapshots');
    phase = 'snapshot';
    await page.locator('#snapshots-table a.snap').first().click();
    await page.locator('#groups details').first().waitFor({ timeout: 10000 });
    const pictureState = async sel => {
      await waitFor(page, s => !/^Loading/.test(document.querySelector(s).textContent) || !!document.querySelector(s + ' svg'),
        sel, 10000);
      return {
        svg: await page.locator(sel + ' svg').count(),
        frames: await page.locator(sel + ' svg g.frame').count(),
        unavailable: await page.locator(sel + ' .unavailable').count(),
        scripts: await page.locator(sel + ' script').count(),
        text: (await page.locator(sel).textContent()).slice(0, 200),
      };
    };
    result.steps.snapshot = {
      why: await page.locator('#why').textContent(),
      cmdline: await page.locator('#why .cmdline').textContent(),
      groups: await page.locator('#groups details').count(),
      open_groups: await page.locator('#groups details[open]').count(),
      chain: await pictureState('#chain-picture'),
      flame: await pictureState('#flame-picture'),
      injected: await page.evaluate(() => document.querySelectorAll('main img, main b').length),
    };
    await waitFor(page, () => !/^Loading/.test(document.getElementById('diff').textContent), null, 10000);
    result.steps.snapshot.diff = await page.locator('#diff').textContent();
    await shot('snapshot');

    // A process: "capture now" is refused with the read token ...
    phase = 'capture-read';
    await page.goto(cfg.base + '/#/process/' + cfg.pid);
    await page.locator('#capture').click();
    await page.locator('#capture-refused').waitFor({ timeout: 10000 });
    result.steps.capture_read = { text: await page.locator('#capture-refused').textContent() };
    await shot('capture-refused');
    // ... and works with the capture token, typed in the token box.
    phase = 'capture';
    await page.fill('#token', cfg.capture_token);
    await page.locator('#token-form button').click();
    await page.locator('#capture').click();
    await page.locator('#capture-ok').waitFor({ timeout: 20000 });
    result.steps.capture = {
      text: await page.locator('#capture-ok').textContent(),
      groups: await page.locator('#capture-result details').count(),
    };
    await shot('capture');

    // Without a token, the page says what it needs instead of showing an empty table.
    phase = 'no-token';
    await page.evaluate(() => sessionStorage.clear());
    await page.goto(cfg.base + '/#/');
    await page.reload();
    await waitFor(page, () => /wants a token/.test(document.getElementById('now-stamp').textContent), null, 10000);
    result.steps.no_token = { text: await page.locator('#now-stamp').textContent() };
    await shot('no-token');
    result.steps.final_dialogs = result.dialogs.length;
  } finally {
    await context.close();
  }
}

main().then(() => { console.log(JSON.stringify(result)); },
  e => { result.error = String(e && e.stack || e); console.log(JSON.stringify(result)); process.exitCode = 1; });
