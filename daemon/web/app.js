// stackwatch's page: a static shell; every piece of data comes from the JSON API with the bearer token. Every name
// from /proc or a snapshot is inserted as text (textContent, createTextNode), never as HTML.
'use strict';

const TOKEN_KEY = 'stackwatch-token';
let refreshTimer = null;

// A token in the fragment (never sent to the server) moves to sessionStorage and out of the address bar; the route
// around it stays: "#token=T", "#token=T&/snapshots/ID", "#/snapshots/ID&token=T" (an alert's link, page-link.c,
// with the token added), "#/snapshots?pid=1&token=T".
(function takeToken() {
  const h = location.hash.replace(/^#/, '');
  const m = /(^|[?&])token=([^&]*)/.exec(h);
  if (!m) return;
  let t = m[2];
  try { t = decodeURIComponent(t); } catch (e) { /* not %-encoded: as it is */ }
  sessionStorage.setItem(TOKEN_KEY, t);
  const after = h.slice(m.index + m[0].length).replace(/^&/, '');
  const rest = (h.slice(0, m.index) + (after ? m[1] : '') + after).replace(/\?$/, '');
  history.replaceState(null, '', location.pathname + location.search + '#' + (rest.startsWith('/') ? rest : '/'));
})();

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

async function api(path, kind) {
  const headers = {};
  if (token()) headers.Authorization = 'Bearer ' + token();
  let resp;
  // A busy daemon answers 429 with Retry-After (stored snapshots read two at a time): wait as it says, a few times.
  for (let attempt = 0; ; attempt++) {
    try {
      resp = await fetch(path, { headers, cache: 'no-store' });
    } catch (e) {
      return { status: 0, error: 'the daemon does not answer: ' + e.message };
    }
    const after = Number(resp.headers.get('Retry-After'));
    if (resp.status !== 429 || !(after > 0) || attempt >= 4) break;
    await new Promise((done) => setTimeout(done, Math.min(after, 5) * 1000));
  }
  const text = await resp.text();
  if (!resp.ok) {
    let msg = text;
    try { msg = JSON.parse(text).error || text; } catch (e) { /* not JSON */ }
    return { status: resp.status, error: msg };
  }
  if (kind === 'text') return { status: resp.status, text };
  try { return { status: resp.status, json: JSON.parse(text) }; }
  catch (e) { return { status: resp.status, error: 'not JSON: ' + e.message }; }
}

// el('td', {class: 'x'}, 'text', node, ...): strings become text nodes.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'onclick') e.addEventListener('click', v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null) continue;
    e.appendChild(typeof k === 'object' ? k : document.createTextNode(String(k)));
  }
  return e;
}

function pidLink(pid) { return el('a', { href: '#/process/' + encodeURIComponent(pid), class: 'pid' }, String(pid)); }
function problemLink(sig, text) { return el('a', { href: '#/problems?signature=' + encodeURIComponent(sig) }, text); }
function snapLink(id) { return el('a', { href: '#/snapshots/' + encodeURIComponent(id), class: 'snap' }, String(id)); }
function fmtMs(ms) {
  if (ms === undefined || ms === null) return '';
  const s = ms / 1000;
  return s < 60 ? s.toFixed(1) + ' s' : s < 3600 ? (s / 60).toFixed(1) + ' min' : (s / 3600).toFixed(1) + ' h';
}
function fmtTime(usec) { return usec ? new Date(usec / 1000).toISOString().replace('T', ' ').replace(/\..*/, ' UTC') : ''; }

function showError(msg) {
  const e = document.getElementById('error');
  e.textContent = msg || '';
  e.hidden = !msg;
}
function authHint(r) {
  if (r.status === 401) return 'The daemon wants a token (' + r.error + '): paste one in the token box, or open /#token=…';
  return 'HTTP ' + r.status + ': ' + r.error;
}
function main(...kids) {
  const m = document.getElementById('main');
  m.replaceChildren(...kids);
  return m;
}

// ---- health, in the footer ----
async function health() {
  const f = document.getElementById('health');
  const r = await api('/healthz');
  if (r.error) { f.replaceChildren(el('span', { class: 'refused' }, 'health: ' + authHint(r))); return; }
  const h = r.json, sc = h.scan || {}, parts = [];
  parts.push('status ' + (h.status || '?'));
  const age = sc.last_scan_age_ms ?? h.last_scan_age_ms;
  if (age !== undefined) parts.push('last scan ' + fmtMs(age) + ' ago');
  if (sc.scans !== undefined) parts.push(sc.scans + ' scans');
  if (sc.threads !== undefined) parts.push(sc.threads + ' threads in ' + sc.processes + ' processes');
  const snaps = h.snapshots_written ?? (h.archive && h.archive.snapshots);
  if (snaps !== undefined) parts.push(snaps + ' snapshots');
  const reload = h.reload || (h.config && h.config.reload);
  if (reload !== undefined) parts.push('config reload ' + (typeof reload === 'object' ? JSON.stringify(reload) : reload));
  f.replaceChildren(el('span', { id: 'health-text' }, parts.join(' · ')));
}

// ---- Now: the threads in a problem class ----
async function viewNow() {
  const table = el('table', { id: 'now-table' },
    el('thead', {}, el('tr', {}, ['Class', 'For', 'PID', 'TID', 'Process', 'Thread', 'Unit', 'Where'].map(h => el('th', {}, h)))),
    el('tbody', {}));
  const stamp = el('p', { id: 'now-stamp' }, 'Loading…');
  main(el('h2', {}, 'Now: threads in a problem class'), stamp, table);
  async function refresh() {
    const r = await api('/processes');
    if (r.error) { stamp.textContent = authHint(r); return; }
    const threads = r.json.threads || [];
    const rows = threads.map(t => el('tr', { class: 'now-thread' },
      el('td', { class: 'class-' + t.class }, t.class || ''),
      el('td', {}, fmtMs(t.for_ms)),
      el('td', {}, pidLink(t.pid)),
      el('td', {}, String(t.tid ?? '')),
      el('td', { class: 'process-comm' }, t.process_comm || ''),
      el('td', { class: 'comm' }, t.comm || ''),
      el('td', {}, t.unit || ''),
      el('td', { class: 'where' }, t.python_frame || (t.syscall ? t.syscall + '()' : '') || t.wchan || '')));
    table.tBodies[0].replaceChildren(...rows);
    stamp.textContent = threads.length + ' thread(s) in a problem class · refreshed ' + new Date().toLocaleTimeString();
  }
  await refresh();
  refreshTimer = setInterval(refresh, 2000);
}

// ---- Snapshots: the archive, newest first, paged ----
const PAGE = 25;
async function viewSnapshots(params) {
  const page = Math.max(0, parseInt(params.get('page') || '0', 10) || 0);
  const q = new URLSearchParams();
  for (const k of ['pid', 'rule', 'since', 'signature']) if (params.get(k)) q.set(k, params.get(k));
  q.set('limit', String((page + 1) * PAGE + 1));
  const form = el('form', { class: 'filters', id: 'filters' },
    el('label', {}, 'PID ', el('input', { name: 'pid', value: params.get('pid') || '' })), ' ',
    el('label', {}, 'Rule ', el('input', { name: 'rule', value: params.get('rule') || '' })), ' ',
    el('label', {}, 'Since (µs since epoch) ', el('input', { name: 'since', value: params.get('since') || '' })), ' ',
    el('label', {}, 'Problem ', el('input', { name: 'signature', value: params.get('signature') || '' })), ' ',
    el('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const i of form.querySelectorAll('input')) if (i.value) p.set(i.name, i.value);
    location.hash = '#/snapshots?' + p.toString();
  });
  const body = el('div', {}, 'Loading…');
  main(el('h2', {}, 'Snapshots'), form, body);
  const r = await api('/snapshots?' + q.toString());
  if (r.error) { body.replaceChildren(el('p', { class: 'refused' }, authHint(r))); return; }
  const all = (r.json.snapshots || []).slice().sort((a, b) => (b.timestamp_usec || 0) - (a.timestamp_usec || 0));
  const shown = all.slice(page * PAGE, (page + 1) * PAGE);
  const table = el('table', { id: 'snapshots-table' },
    el('thead', {}, el('tr', {}, ['ID', 'Time', 'PID', 'Process', 'Rule', 'Problem', 'Size'].map(h => el('th', {}, h)))),
    el('tbody', {}, shown.map(s => el('tr', {},
      el('td', {}, snapLink(s.id)), el('td', {}, fmtTime(s.timestamp_usec)),
      el('td', {}, s.pid !== undefined ? pidLink(s.pid) : ''), el('td', {}, s.comm || ''),
      el('td', {}, s.rule || ''), el('td', { class: 'problem' }, s.signature ? problemLink(s.signature, s.title || s.signature) : ''),
      el('td', {}, s.size !== undefined ? String(s.size) : '')))));
  const pager = el('p', {});
  const link = p => { const n = new URLSearchParams(params); n.set('page', String(p)); return '#/snapshots?' + n.toString(); };
  if (page > 0) pager.appendChild(el('a', { href: link(page - 1) }, '← newer'));
  pager.appendChild(document.createTextNode(' page ' + (page + 1) + ' '));
  if (all.length > (page + 1) * PAGE) pager.appendChild(el('a', { href: link(page + 1) }, 'older →'));
  body.replaceChildren(shown.length ? table : el('p', {}, 'No snapshot.'), pager);
}

// ---- Problems: a hang that recurs is one problem with a count, newest first ----
async function viewProblems(params) {
  const q = new URLSearchParams();
  for (const k of ['since', 'limit', 'signature']) if (params.get(k)) q.set(k, params.get(k));
  const body = el('div', {}, 'Loading…');
  main(el('h2', {}, 'Problems'), body);
  const r = await api('/problems' + (q.toString() ? '?' + q.toString() : ''));
  if (r.error) { body.replaceChildren(el('p', { class: 'refused' }, authHint(r))); return; }
  const all = (r.json.problems || []).slice().sort((a, b) => (b.last_usec || 0) - (a.last_usec || 0));
  const link = (id, text) => id ? el('a', { href: '#/snapshots/' + encodeURIComponent(id), class: text }, text) : null;
  const rows = all.map(p => el('tr', { class: 'problem' + (p.open ? ' open' : '') },
    el('td', {}, el('span', { class: 'title' }, p.title || p.signature || '?'), p.open ? el('span', { class: 'open-mark' }, ' open') : null),
    el('td', { class: 'count' }, String(p.count ?? '')),
    el('td', { class: 'first-seen' }, fmtTime(p.first_usec)), el('td', { class: 'last-seen' }, fmtTime(p.last_usec)),
    el('td', { class: 'hosts' }, (p.hosts || []).join(', ')),
    el('td', { class: 'processes' }, (p.processes || []).flatMap((x, i) => [i ? ', ' : null, pidLink(x.pid), ' ',
      el('span', { class: 'comm' }, x.comm || '?')])),
    el('td', { class: 'days' }, Object.keys(p.days || {}).sort().map(d => el('span', { class: 'day' }, d + ': ' + p.days[d]))),
    el('td', { class: 'links' }, link(p.first_id, 'first'), ' ', link(p.latest_id, 'latest'), ' ',
      el('a', { href: '#/snapshots?signature=' + encodeURIComponent(p.signature || ''), class: 'all' },
        'all ' + (p.snapshots ?? '') + ' snapshot(s)'))));
  body.replaceChildren(all.length
    ? el('table', { id: 'problems-table' },
        el('thead', {}, el('tr', {}, ['Problem', 'Count', 'First seen', 'Last seen', 'Hosts', 'Processes', 'Per day',
          'Snapshots'].map(h => el('th', {}, h)))), el('tbody', {}, rows))
    : el('p', {}, 'No problem.'));
  if (r.json.skipped) body.appendChild(el('p', {}, r.json.skipped + ' snapshot(s) could not be read.'));
}

// ---- the pictures: our SVG, fetched, scripts and handlers removed, imported ----
// Its own <style> and style attributes go too: the page's CSP refuses inline styles (app.css has the picture's).
function sanitizeSvg(root) {
  for (const s of root.querySelectorAll('script, foreignObject, style')) s.remove();
  for (const n of [root, ...root.querySelectorAll('*')])
    for (const a of [...n.attributes])
      if (/^on/i.test(a.name) || a.name === 'style' || (/href$/i.test(a.name) && /^\s*javascript:/i.test(a.value)))
        n.removeAttribute(a.name);
  return root;
}
async function picture(id, kind, box) {
  const r = await api('/snapshots/' + encodeURIComponent(id) + '?format=svg&picture=' + kind, 'text');
  if (r.error) {
    box.replaceChildren(el('p', { class: 'unavailable' }, 'picture unavailable (' + r.status + ': ' + r.error + ')'));
    return;
  }
  // Its <style> and style attributes out before the parse: a parsed document keeps the page's CSP, which refuses them
  // (and says so in the console). Text in the picture has its quotes escaped: an attribute's are the only ones.
  const text = r.text.replace(/<style[\s\S]*?<\/style>/g, '').replace(/ style="[^"]*"/g, '');
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const svg = doc.documentElement;
  if (!svg || svg.nodeName !== 'svg' || doc.querySelector('parsererror')) {
    box.replaceChildren(el('p', { class: 'unavailable' }, 'picture unavailable (not an SVG)'));
    return;
  }
  box.replaceChildren(document.importNode(sanitizeSvg(svg), true));
  if (kind === 'flame') flameControls(box);
}
// Click a frame to zoom to its subtree (others hidden); the search box marks frames whose title matches.
function flameControls(box) {
  const svg = box.querySelector('svg');
  const frames = [...svg.querySelectorAll('g.frame')];
  const geo = g => { const r = g.querySelector('rect'); return r ? { x: +r.getAttribute('x'), w: +r.getAttribute('width') } : null; };
  const reset = el('button', { type: 'button' }, 'Reset zoom');
  const search = el('input', { type: 'search', placeholder: 'search frames', id: 'flame-search' });
  reset.addEventListener('click', () => { for (const f of frames) f.classList.remove('hidden'); svg.removeAttribute('viewBox'); });
  search.addEventListener('input', () => {
    const q = search.value.toLowerCase();
    for (const f of frames) f.classList.toggle('match', !!q && (f.textContent || '').toLowerCase().includes(q));
  });
  for (const f of frames) f.addEventListener('click', () => {
    const g = geo(f);
    if (!g) return;
    for (const o of frames) { const h = geo(o); o.classList.toggle('hidden', !h || h.x + h.w <= g.x || h.x >= g.x + g.w); }
    const vb = svg.viewBox.baseVal, height = vb && vb.height ? vb.height : svg.getBBox().height;
    svg.setAttribute('viewBox', g.x + ' 0 ' + g.w + ' ' + height);
  });
  box.prepend(el('div', {}, search, ' ', reset));
}

// ---- grouped stacks, and the diff against the previous snapshot ----
function frameLine(f) {
  let s = f.function || f.pc || '?';
  if (f.file) s += ' (' + f.file + (f.line ? ':' + f.line : '') + ')';
  return s;
}
function groupsOf(snap) {
  const byTid = new Map((snap.threads || []).map(t => [t.tid, t]));
  const groups = snap.thread_groups || (snap.threads || []).map(t => ({ count: 1, tids: [t.tid] }));
  return groups.map(g => {
    const t = byTid.get(g.tids && g.tids[0]) || {};
    const frames = [...(t.frames || []).map(frameLine), ...(t.kernel_stack || []).map(k => '[k] ' + k.function)];
    return { ...g, thread: t, frames, key: (t.state || '') + '|' + (t.frames || []).map(f => f.function || '?').join(';') };
  });
}
// A process's groups; OPEN: the TIDs whose group shows open besides the culprit's (a peer's threads in the chain).
function groupsView(snap, attrs, open) {
  const box = el('div', attrs || { id: 'groups' });
  for (const g of groupsOf(snap)) {
    const t = g.thread, shown = g.culprit || (g.tids || []).some(tid => open && open.has(tid));
    const top = t.frames && t.frames[0] ? frameLine(t.frames[0]) : (t.wchan || '?');
    const d = el('details', { class: 'group' + (g.culprit ? ' culprit' : '') + (g.problem ? ' problem' : ''), open: shown || undefined },
      el('summary', {}, g.count + ' thread(s) ' + (t.state || '') + (t.comm ? ' "' + t.comm + '"' : '') + ' in ' + top + (g.culprit ? ' — the culprit' : '')),
      el('p', {}, 'TIDs: ' + (g.tids || []).join(', ')),
      el('pre', {}, g.frames.join('\n')));
    box.appendChild(d);
  }
  return box;
}
function diffGroups(prev, cur) {
  const count = gs => { const m = new Map(); for (const g of gs) m.set(g.key, { n: (m.get(g.key)?.n || 0) + g.count, g }); return m; };
  const a = count(groupsOf(prev)), b = count(groupsOf(cur)), rows = [];
  for (const [k, v] of b) {
    const before = a.get(k)?.n || 0;
    const what = before === 0 ? 'appeared' : v.n > before ? 'grew' : v.n < before ? 'shrank' : null;
    if (what) rows.push([what, before, v.n, v.g]);
  }
  for (const [k, v] of a) if (!b.has(k)) rows.push(['disappeared', v.n, 0, v.g]);
  if (!rows.length) return el('p', {}, 'The same groups as the previous snapshot.');
  return el('table', { id: 'diff-table' }, el('tr', {}, ['Change', 'Before', 'Now', 'Top frame'].map(h => el('th', {}, h))),
    rows.map(([w, n0, n1, g]) => el('tr', { class: w }, el('td', {}, w), el('td', {}, String(n0)), el('td', {}, String(n1)),
      el('td', {}, g.frames[0] || '?'))));
}
async function diffView(snap, id, box) {
  const pid = snap.process && snap.process.pid;
  const r = await api('/snapshots?' + new URLSearchParams(pid ? { pid: String(pid) } : { rule: snap.trigger?.rule || '' }));
  if (r.error) { box.replaceChildren(el('p', { class: 'unavailable' }, 'no diff: ' + authHint(r))); return; }
  const older = (r.json.snapshots || []).filter(s => String(s.id) !== String(id) && (s.timestamp_usec || 0) < (snap.timestamp_usec || 0))
    .sort((x, y) => y.timestamp_usec - x.timestamp_usec);
  if (!older.length) { box.replaceChildren(el('p', {}, 'No earlier snapshot of this process to compare with.')); return; }
  const p = await api('/snapshots/' + encodeURIComponent(older[0].id));
  if (p.error) { box.replaceChildren(el('p', { class: 'unavailable' }, 'no diff: ' + authHint(p))); return; }
  box.replaceChildren(el('p', {}, 'Against ', snapLink(older[0].id), ' (' + fmtTime(older[0].timestamp_usec) + '):'), diffGroups(p.json, snap));
}

// The snapshot's process's groups, and under a heading of its own each peer's (the processes of its wait chain).
function processGroups(s) {
  const peers = s.peers || [];
  if (!peers.length) return [groupsView(s)];
  const chained = new Set(((s.wait_chain || {}).edges || []).map(e => e.from && e.from.tid));
  const head = (p, what) => el('h4', { class: what === 'Process' ? 'process-head' : 'peer-head' }, what + ' ', pidLink(p.pid),
    ' (', el('span', { class: 'comm' }, p.comm || '?'), ')');
  return [head(s.process || {}, 'Process'), groupsView(s),
    ...peers.flatMap(p => [head(p.process || {}, 'Peer process'), groupsView(p, { class: 'peer-groups' }, chained)])];
}

// What fired, as a person reads it; the trigger's raw JSON behind a toggle.
function probeText(p) {
  const ms = ' in ' + Math.round((p.window_us || 0) / 1000) + ' ms';
  if (!p.syscall && (p.result === null || p.result === undefined)) return 'no syscall returned' + ms;
  return p.syscall + ' = ' + (p.error ? '-' + p.error : String(p.result)) + ' ×' + p.count + ' of ' + p.syscalls + ' syscalls' + ms;
}
// A thread's innermost frame of the program's own code where a runtime runs it (its line, as the daemon names it in
// "Now"), else its innermost frame.
function whereOf(t) {
  const frames = (t && t.frames) || [], f = frames.find(x => x.kind);
  if (f) return (f.function || '?') + (f.file ? ' (' + f.file.replace(/.*\//, '') + (f.line ? ':' + f.line : '') + ')' : '');
  return frames[0] ? frameLine(frames[0]) : null;
}
function triggerView(s) {
  const t = s.trigger;
  if (!t) return el('p', {}, 'None: captured on request.');
  const th = (s.threads || []).find(x => x.tid === t.tid);
  const rows = [['Rule', t.rule], ['Class', t.class],
    ['For', t.duration_us !== undefined && t.duration_us !== null ? fmtMs(t.duration_us / 1000) : null],
    ['Thread', t.tid ? t.tid + (th && th.comm ? ' "' + th.comm + '"' : '') : null], ['State', t.state],
    ['Syscall', t.syscall], ['Wchan', t.wchan], ['Where', whereOf(th)],
    ['CPU', t.cpu_percent ? t.cpu_percent.toFixed(0) + ' %' : null],
    ['Syscall rate', t.syscalls_per_sec ? t.syscalls_per_sec.toFixed(0) + '/s, ' + (t.bytes_per_sec || 0).toFixed(0) + ' bytes/s' : null],
    ['Probe', t.probe ? probeText(t.probe) : null]].filter(([, v]) => v !== null && v !== undefined && v !== '');
  return el('div', {},
    el('table', { id: 'trigger-table' }, rows.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, String(v))))),
    el('details', { id: 'trigger-raw' }, el('summary', {}, 'Raw JSON'), el('pre', {}, JSON.stringify(t, null, 1))));
}

// ---- one snapshot ----
async function viewSnapshot(id) {
  main(el('p', {}, 'Loading snapshot ' + id + '…'));
  const r = await api('/snapshots/' + encodeURIComponent(id));
  if (r.error) { main(el('p', { class: 'refused' }, authHint(r))); return; }
  const s = r.json, p = s.process || {};
  const why = el('dl', { id: 'why' },
    el('dt', {}, 'Process'), el('dd', {}, pidLink(p.pid), ' ', el('span', { class: 'comm' }, p.comm || ''), ' ',
      el('span', { class: 'cmdline' }, (p.cmdline || []).join(' '))),
    el('dt', {}, 'Taken'), el('dd', {}, fmtTime(s.timestamp_usec)),
    el('dt', {}, 'Trigger'), el('dd', {}, triggerView(s)));
  const chain = el('div', { class: 'picture', id: 'chain-picture' }, 'Loading…');
  const flame = el('div', { class: 'picture', id: 'flame-picture' }, 'Loading…');
  const diff = el('div', { id: 'diff' }, 'Loading…');
  main(el('h2', {}, 'Snapshot ', String(id)),
    el('section', {}, el('h3', {}, 'What fired and why'), why),
    el('section', { id: 'chain-section' }, el('h3', {}, 'Wait chain'), chain),
    el('section', { id: 'groups-section' }, el('h3', {}, 'Stacks, grouped'), ...processGroups(s)),
    el('section', { id: 'flame-section' }, el('h3', {}, 'Flame graph'), flame),
    el('section', { id: 'diff-section' }, el('h3', {}, 'Against the previous snapshot'), diff));
  await Promise.all([picture(id, 'chain', chain), picture(id, 'flame', flame), diffView(s, id, diff)]);
}

// ---- a process: its threads now, and "capture now" ----
async function viewProcess(pid) {
  const result = el('div', { id: 'capture-result' });
  const button = el('button', { type: 'button', id: 'capture' }, 'Capture now');
  const threads = el('div', {}, 'Loading…');
  main(el('h2', {}, 'Process ', String(pid)), threads, el('p', {}, button), result);
  button.addEventListener('click', async () => {
    button.disabled = true;
    result.replaceChildren(el('p', {}, 'Capturing…'));
    const r = await api('/stacks/' + encodeURIComponent(pid));
    button.disabled = false;
    if (r.status === 403) {
      result.replaceChildren(el('p', { class: 'refused', id: 'capture-refused' },
        'Refused (403): ' + r.error));
      return;
    }
    if (r.error) { result.replaceChildren(el('p', { class: 'refused', id: 'capture-refused' }, authHint(r))); return; }
    result.replaceChildren(el('p', { class: 'ok', id: 'capture-ok' }, 'Captured ' + (r.json.threads || []).length + ' thread(s):'),
      groupsView(r.json));
  });
  const r = await api('/processes?all=1');
  if (r.error) { threads.replaceChildren(el('p', { class: 'refused' }, authHint(r))); return; }
  const mine = (r.json.threads || []).filter(t => String(t.pid) === String(pid));
  threads.replaceChildren(mine.length
    ? el('table', {}, el('tr', {}, ['TID', 'Thread', 'State', 'Class', 'For'].map(h => el('th', {}, h))),
        mine.map(t => el('tr', {}, el('td', {}, String(t.tid)), el('td', { class: 'comm' }, t.comm || ''), el('td', {}, t.state || ''),
          el('td', { class: 'class-' + t.class }, t.class || ''), el('td', {}, fmtMs(t.for_ms)))))
    : el('p', {}, 'No such process in the last scan.'));
}

// ---- routing ----
async function route() {
  if (refreshTimer) { clearInterval(refreshTimer); refreshTimer = null; }
  showError('');
  const h = location.hash.replace(/^#/, '') || '/';
  const [path, query] = h.split('?');
  const params = new URLSearchParams(query || '');
  let m;
  if ((m = /^\/snapshots\/([^/]+)$/.exec(path))) await viewSnapshot(decodeURIComponent(m[1]));
  else if (path === '/snapshots') await viewSnapshots(params);
  else if (path === '/problems') await viewProblems(params);
  else if ((m = /^\/process\/(\d+)$/.exec(path))) await viewProcess(m[1]);
  else await viewNow();
  document.body.dataset.loaded = h;
}

document.getElementById('token-form').addEventListener('submit', ev => {
  ev.preventDefault();
  const i = document.getElementById('token');
  if (i.value) sessionStorage.setItem(TOKEN_KEY, i.value); else sessionStorage.removeItem(TOKEN_KEY);
  i.value = '';
  route(); health();
});
window.addEventListener('hashchange', route);
route();
health();
setInterval(health, 5000); // on every view: the footer says whether the daemon still scans
