/**
 * The dashboard's page, script and style, shipped inside the package (no CDN, no framework, no
 * build step). The script builds every node with `textContent`, never `innerHTML`: keys, bodies,
 * headers and errors are shown as text whatever they hold.
 */

/** The page; the token is hex (checked) so it needs no escaping in the attribute. */
export function dashboardPage(token: string): string {
  if (!/^[0-9a-f]+$/i.test(token)) throw new Error('the dashboard token must be hex');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="oncemq-token" content="${token}">
<title>oncemq dashboard</title>
<link rel="stylesheet" href="/dashboard.css">
<script type="module" src="/dashboard.js"></script>
</head>
<body>
<header><h1>oncemq dashboard</h1><p id="sources"></p><p id="status" role="status" aria-live="polite">loading…</p></header>
<main>
<section id="outcomes"><h2>Outcomes</h2><div class="body"></div></section>
<section id="stuck"><h2>Stuck claims</h2><p class="hint">PROCESSING rows whose lease ended: the owner died or hangs. Reset deletes the row only if it still has the owner and attempt shown.</p><div class="body"></div></section>
<section id="failed"><h2>Failed claims</h2><p class="hint">FAIL rows with the error of the last attempt; the next delivery, or a replay of its dead letter, reclaims them.</p><div class="body"></div></section>
<section id="dead-letters"><h2>Dead letters</h2><p class="hint">Replay sends a new copy to its group only; the ledger applies it at most once. Discard deletes for good.</p><div class="body"></div></section>
</main>
</body>
</html>
`;
}

export const DASHBOARD_CSS = `
:root { font-family: system-ui, sans-serif; color: #1d232b; background: #f6f7f9; }
body { margin: 0; }
header { background: #1d232b; color: #f6f7f9; padding: 0.6rem 1.2rem; }
header h1 { font-size: 1.2rem; margin: 0; }
header p { margin: 0.2rem 0 0; font-size: 0.85rem; opacity: 0.85; }
main { display: grid; gap: 1rem; padding: 1rem 1.2rem; }
section { background: #fff; border: 1px solid #d8dce2; border-radius: 6px; padding: 0.6rem 0.9rem; overflow-x: auto; }
h2 { font-size: 1rem; margin: 0 0 0.4rem; }
.hint { color: #58606b; font-size: 0.8rem; margin: 0 0 0.5rem; }
table { border-collapse: collapse; font-size: 0.85rem; width: 100%; }
th, td { text-align: left; padding: 0.25rem 0.5rem; border-bottom: 1px solid #eceef1; vertical-align: top; }
th { color: #58606b; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.cards { display: flex; flex-wrap: wrap; gap: 0.6rem; margin-bottom: 0.6rem; }
.card { border: 1px solid #d8dce2; border-radius: 6px; padding: 0.4rem 0.7rem; min-width: 8rem; }
.card .value { font-size: 1.4rem; font-variant-numeric: tabular-nums; }
.card .label { color: #58606b; font-size: 0.8rem; }
.card.duplicate { border-color: #7aa7d9; }
.card.dead { border-color: #d99a7a; }
.error { color: #a1260d; white-space: pre-wrap; }
.empty { color: #58606b; }
pre { background: #f1f3f5; padding: 0.5rem; white-space: pre-wrap; word-break: break-all; max-height: 20rem; overflow: auto; margin: 0.3rem 0; }
button { font: inherit; font-size: 0.8rem; margin-right: 0.3rem; cursor: pointer; }
button.danger { color: #a1260d; }
`;

export const DASHBOARD_JS = String.raw`
const token = document.querySelector('meta[name="oncemq-token"]').getAttribute('content');
// The token stays in the cookie the page set and in this script: take it off the address bar.
if (location.search !== '') history.replaceState(null, '', '/');

const OUTCOMES = ['executed', 'duplicate', 'busy', 'retry', 'dead', 'conflict'];
const SOURCES = ['redelivery', 'republish', 'concurrent'];
const expanded = new Set();
let previous = null;
let message = '';

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (name === 'text') node.textContent = String(value);
    else if (name === 'onclick') node.addEventListener('click', value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function table(headers, rows) {
  return el('table', {}, el('thead', {}, el('tr', {}, ...headers.map((h) => el('th', { text: h })))), el('tbody', {}, ...rows));
}

function fill(id, ...nodes) {
  document.querySelector('#' + id + ' .body').replaceChildren(...nodes);
}

function errorNode(text) {
  return el('p', { class: 'error', text: text });
}

async function call(path, body) {
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-oncemq-token': token },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

function act(label, path, body, confirmText) {
  return async () => {
    if (confirmText && !confirm(confirmText)) return;
    try {
      const answer = await call(path, body);
      message = label + ': ' + (answer.reason !== undefined ? answer.reason : answer.done + ' of ' + answer.requested);
    } catch (error) {
      message = label + ' failed: ' + error.message;
    }
    await refresh();
  };
}

function toggle(id) {
  return () => {
    if (expanded.has(id)) expanded.delete(id);
    else expanded.add(id);
    refresh();
  };
}

function card(kind, id, label, value, rate) {
  return el('div', { class: 'card ' + kind, 'data-metric': id },
    el('div', { class: 'value', id: 'total-' + id, text: value }),
    el('div', { class: 'label', text: label + (rate === null ? '' : ' · ' + rate + '/s') }));
}

function rateOf(path, metrics, at) {
  if (previous === null || previous.metrics === null) return null;
  const seconds = (at - previous.at) / 1000;
  if (seconds <= 0) return null;
  const now = path.reduce((value, name) => (value ? value[name] : 0), metrics) || 0;
  const before = path.reduce((value, name) => (value ? value[name] : 0), previous.metrics) || 0;
  return Math.max(0, (now - before) / seconds).toFixed(1);
}

function renderOutcomes(state) {
  if (state.metrics === null) {
    fill('outcomes', el('p', { class: 'empty', text: 'No counters: start the dashboard with --metrics URL (the consumer’s Prometheus endpoint), or run oncemq demo --dashboard.' }));
    return;
  }
  if (!state.metrics.ok) {
    fill('outcomes', errorNode(state.metrics.error));
    return;
  }
  const m = state.metrics.value;
  const at = Date.parse(state.at);
  const cards = [card('', 'deliveries', 'deliveries', m.deliveries, rateOf(['deliveries'], m, at))];
  for (const kind of OUTCOMES) cards.push(card(kind === 'dead' ? 'dead' : '', kind, kind, m.outcomes[kind] || 0, rateOf(['outcomes', kind], m, at)));
  const duplicates = SOURCES.map((source) => card('duplicate', 'duplicate-' + source, 'duplicates · ' + source, m.duplicates[source] || 0, rateOf(['duplicates', source], m, at)));
  const reasons = Object.entries(m.deadLettered).map(([reason, n]) => el('tr', {}, el('td', { text: reason }), el('td', { class: 'num', text: n })));
  fill('outcomes',
    el('div', { class: 'cards' }, ...cards),
    el('h3', { text: 'Duplicates absorbed, by source' }),
    el('div', { class: 'cards' }, ...duplicates),
    el('h3', { text: 'Dead-lettered, by reason' }),
    reasons.length === 0 ? el('p', { class: 'empty', text: 'none' }) : table(['reason', 'messages'], reasons));
  previous = { at: at, metrics: m };
}

function claimRows(rows, stuck) {
  const out = [];
  for (const row of rows) {
    const id = 'claim:' + row.group + ':' + row.key;
    out.push(el('tr', { 'data-key': row.key },
      el('td', { text: row.group }),
      el('td', { class: 'key', text: row.key }),
      el('td', { class: 'num', text: row.attempt }),
      el('td', { text: stuck ? (row.leaseUntil || 'never set') : row.updatedAt }),
      el('td', { text: stuck ? (row.owner || '') : (row.remark || '') }),
      el('td', {},
        el('button', { onclick: toggle(id), text: expanded.has(id) ? 'hide' : 'inspect' }),
        stuck ? el('button', { class: 'danger', onclick: act('reset ' + row.key, '/api/claims/reset', { group: row.group, key: row.key, owner: row.owner, attempt: row.attempt }, 'Reset the stuck claim of ' + row.key + '? The next delivery runs it again.'), text: 'reset' }) : null)));
    if (expanded.has(id)) out.push(el('tr', {}, el('td', { colspan: 6 }, el('pre', { text: JSON.stringify(row, null, 2) }))));
  }
  return out;
}

function renderClaims(id, part, stuck) {
  if (part === null) {
    fill(id, el('p', { class: 'empty', text: 'No ledger: start the dashboard with --store.' }));
  } else if (!part.ok) {
    fill(id, errorNode(part.error));
  } else if (part.value.length === 0) {
    fill(id, el('p', { class: 'empty', text: stuck ? 'no stuck claims' : 'no failed claims' }));
  } else {
    fill(id, table(['group', 'key', 'attempt', stuck ? 'lease ended' : 'updated', stuck ? 'owner' : 'error', ''], claimRows(part.value, stuck)));
  }
}

function letterRows(group, letters) {
  const out = [];
  for (const letter of letters) {
    const id = 'dead:' + group + ':' + letter.id;
    out.push(el('tr', { 'data-id': letter.id },
      el('td', { text: letter.id }),
      el('td', { class: 'key', text: letter.key === null ? '—' : letter.key }),
      el('td', { text: letter.topic }),
      el('td', { text: letter.reason }),
      el('td', { class: 'num', text: letter.deliveryCount }),
      el('td', { text: letter.deadAt }),
      el('td', {},
        el('button', { onclick: toggle(id), text: expanded.has(id) ? 'hide' : 'inspect' }),
        el('button', { class: 'replay', onclick: act('replay #' + letter.id, '/api/dead-letters/replay', { group: group, ids: [letter.id] }), text: 'replay' }),
        el('button', { class: 'danger', onclick: act('discard #' + letter.id, '/api/dead-letters/discard', { group: group, ids: [letter.id] }, 'Discard dead letter #' + letter.id + ' for good?'), text: 'discard' }))));
    if (expanded.has(id)) {
      out.push(el('tr', {}, el('td', { colspan: 7 },
        el('div', { text: 'error: ' + (letter.error || '—') }),
        el('div', { text: 'headers:' }), el('pre', { text: JSON.stringify(letter.headers, null, 2) }),
        el('div', { text: 'body (' + letter.bodyBytes + ' bytes, ' + letter.bodyEncoding + '):' }), el('pre', { class: 'body-text', text: letter.body }))));
    }
  }
  return out;
}

function renderDeadLetters(state) {
  if (state.deadLetters === null) {
    fill('dead-letters', el('p', { class: 'empty', text: 'No dead-letter queue: start the dashboard with --transport and --group.' }));
    return;
  }
  const nodes = [];
  for (const [group, part] of Object.entries(state.deadLetters)) {
    nodes.push(el('h3', { text: 'group ' + group }));
    if (!part.ok) nodes.push(errorNode(part.error));
    else if (part.value.length === 0) nodes.push(el('p', { class: 'empty', text: 'no dead letters' }));
    else nodes.push(table(['id', 'key', 'topic', 'reason', 'attempt', 'dead at', ''], letterRows(group, part.value)));
  }
  if (nodes.length === 0) nodes.push(el('p', { class: 'empty', text: 'No group: start the dashboard with --group.' }));
  fill('dead-letters', ...nodes);
}

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const response = await fetch('/api/state', { headers: { 'x-oncemq-token': token } });
    if (!response.ok) throw new Error(response.status + ' ' + (await response.text()));
    const state = await response.json();
    const parts = [];
    if (state.store !== null) parts.push('ledger ' + state.store);
    if (state.transport !== null) parts.push('dead letters ' + state.transport);
    if (state.metricsSource !== null) parts.push('counters ' + state.metricsSource);
    document.getElementById('sources').textContent = parts.join(' · ');
    renderOutcomes(state);
    renderClaims('stuck', state.stuck, true);
    renderClaims('failed', state.failed, false);
    renderDeadLetters(state);
    document.getElementById('status').textContent = 'updated ' + new Date(state.at).toLocaleTimeString() + (message === '' ? '' : ' · ' + message);
  } catch (error) {
    document.getElementById('status').textContent = 'cannot reach the dashboard: ' + error.message;
  } finally {
    busy = false;
  }
}

refresh();
setInterval(refresh, 1000);
`;
