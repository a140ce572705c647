// Walks Debian's chromium (playwright-core) through stackwatch's page, step by step, and prints one JSON object with
// what a user saw: for tests/integration/test_web_problems.py, which says what to do and judges what was seen. One
// JSON argument: { base, user_data_dir, out, steps: [...] }, each step one of
//   { open: "/#…" }                 a new tab (no token kept from another) at base + that address
//   { go: "/#…" }                   the same tab goes there (a new fragment alone: the page's own hashchange)
//   { wait: SELECTOR, text: RE }    until an element matches (and, with text, its text matches RE)
//   { click: SELECTOR } | { fill: SELECTOR, value: V } | { shot: NAME } (a screenshot in out/NAME.png)
//   { read: { NAME: SELECTOR, … } } every element that matches: its text (and its children's: a row's cells),
//                                   whether it shows, its attributes, its font size and weight and fill
// Each step's result has the address and the token in sessionStorage then.
'use strict';
const { chromium } = require('playwright-core');
const path = require('path');

const cfg = JSON.parse(process.argv[2]);
const result = { console_errors: [], failed_requests: [], dialogs: [], steps: [] };

// page.waitForFunction() evaluates a string, which the page's CSP (rightly) refuses: poll with evaluate() instead.
async function waitFor(page, fn, arg, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await page.evaluate(fn, arg)) return;
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + JSON.stringify(arg));
    await new Promise(r => setTimeout(r, 100));
  }
}

function seen(selectors) {
  const out = {};
  for (const [name, sel] of Object.entries(selectors))
    out[name] = [...document.querySelectorAll(sel)].map(e => ({
      text: e.textContent,
      cells: [...e.children].map(c => c.textContent),  // a table row's cells, apart
      visible: e.checkVisibility() && e.getClientRects().length > 0,  // a closed <details>' content does not show
      style: (st => ({ font_size: st.fontSize, font_weight: st.fontWeight, fill: st.fill }))(getComputedStyle(e)),
      attrs: Object.fromEntries([...e.attributes].map(a => [a.name, a.value])),
    }));
  return out;
}

async function main() {
  const context = await chromium.launchPersistentContext(cfg.user_data_dir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1400, height: 900 },
  });
  let page = null, step = -1;
  const watch = p => {
    p.on('console', m => { if (m.type() === 'error') result.console_errors.push({ step, text: m.text() }); });
    p.on('requestfailed', r => result.failed_requests.push({ step, url: r.url(), error: r.failure()?.errorText }));
    p.on('response', r => { if (r.status() >= 400) result.failed_requests.push({ step, url: r.url(), status: r.status() }); });
    p.on('dialog', d => { result.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  };
  try {
    for (const s of cfg.steps) {
      step++;
      const r = {};
      if (s.open !== undefined) {
        const old = page;
        page = await context.newPage();
        watch(page);
        if (old) await old.close();
        r.status = (await page.goto(cfg.base + s.open)).status();
      } else if (s.go !== undefined) {
        await page.goto(cfg.base + s.go);
      } else if (s.wait) {
        await waitFor(page, ([sel, re]) => [...document.querySelectorAll(sel)].some(e => !re || new RegExp(re).test(e.textContent)),
          [s.wait, s.text || null], s.timeout || 15000);
      } else if (s.click) {
        await page.locator(s.click).first().click();
      } else if (s.fill) {
        await page.fill(s.fill, s.value);
      } else if (s.shot) {
        await page.screenshot({ path: path.join(cfg.out, s.shot + '.png'), fullPage: true });
      } else if (s.read) {
        r.read = await page.evaluate(seen, s.read);
      }
      r.url = page.url();
      r.token = await page.evaluate(() => sessionStorage.getItem('stackwatch-token'));
      result.steps.push(r);
    }
  } catch (e) {
    result.error = 'step ' + step + ' ' + JSON.stringify(cfg.steps[step]) + ': ' + String(e && e.stack || e);
  } finally {
    await context.close();
  }
}

main().then(() => { console.log(JSON.stringify(result)); process.exitCode = result.error ? 1 : 0; });
