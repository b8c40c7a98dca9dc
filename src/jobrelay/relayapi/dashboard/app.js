// The jobrelay dashboard: three live watches (fleet, queues, workloads) rendered as an
// overview, and a workload's detail page (events, mirror, logs). No framework, no build:
// the page is served with a strict Content-Security-Policy, so everything shown is built
// with createElement/textContent (strings are never parsed as HTML) and no inline styles are written
// except through the CSSOM (bar widths).
'use strict';

(() => {
  // -- constants -------------------------------------------------------------------

  // The page lives at .../v1alpha1/dashboard/, possibly behind kubectl proxy or another
  // proxy at a path prefix: every request is relative to the API version's directory.
  // ('.' first, so a page opened as .../dashboard/index.html resolves the same.)
  const BASE = new URL('../', new URL('.', location.href));

  const MAX_ROWS = 500;              // workload rows in the table at once
  const MAX_LOG_LINES = 2000;
  const SAMPLE_MS = 5000;            // queue share samples (and age refresh)
  const HISTORY_MS = 10 * 60 * 1000; // share chart window
  const DETAIL_REFRESH_MS = 5000;
  const BACKOFF_MIN_MS = 1000;
  const BACKOFF_MAX_MS = 30000;
  const FORBIDDEN_RETRY_MS = 30000;  // a refused watch is not asked again sooner
  const REASON_CHARS = 120;
  const NONE = '-';                  // <select> value for "no queue"/"no worker" (never a k8s name)

  const KNOWN_STATES = ['Running', 'Dispatched', 'Pending', 'Held', 'Blocked', 'Suspended', 'Complete', 'Failed'];
  const TIMELINE_REASONS = new Set(['Dispatched', 'Placed', 'Preempted', 'Preempting', 'Lost', 'Moved', 'Completed', 'Failed', 'Drained']);
  const RUN_STARTS = new Set(['Dispatched', 'Placed', 'Moved']);
  const RUN_ENDS = new Set(['Preempted', 'Lost', 'Moved', 'Drained', 'Completed', 'Failed']);
  const SERIES_COLORS = 8;           // .series-0 … .series-7 in style.css

  // -- small helpers ---------------------------------------------------------------

  const $ = (id) => document.getElementById(id);
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const byName = (a, b) => String(a.name).localeCompare(String(b.name));

  /** An element with attributes ('text' and 'class' are special) and children (strings become text). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value == null || value === false) continue;
      if (key === 'text') node.textContent = String(value);
      else if (key === 'class') node.className = value;
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children) if (child != null && child !== false) node.append(child);
    return node;
  }

  const SVG_NS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text != null) node.textContent = text;
    return node;
  }

  /** Sets text only when it changed: keeps aria-live quiet and layout cheap. */
  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function truncate(text, max) {
    return text.length > max ? `${text.slice(0, max - 1)}…` : text;
  }

  function pct(fraction) {
    if (typeof fraction !== 'number' || !Number.isFinite(fraction)) return '—';
    const value = fraction * 100;
    return `${value < 10 ? value.toFixed(1) : value.toFixed(0)}%`;
  }

  /** kubectl-style age: 45s, 12m, 5h, 3d. */
  function age(iso, now = Date.now()) {
    const t = Date.parse(iso);
    if (!Number.isFinite(t)) return '';
    const s = Math.max(0, Math.round((now - t) / 1000));
    if (s < 120) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 120) return `${m}m`;
    const h = Math.floor(m / 60);
    return h < 48 ? `${h}h` : `${Math.floor(h / 24)}d`;
  }

  function timeCell(iso) {
    const t = Date.parse(iso);
    if (!Number.isFinite(t)) return el('td', { text: '' });
    const label = `${age(iso)} ago`;
    return el('td', {}, el('time', { datetime: iso, title: new Date(t).toLocaleString(), text: label }));
  }

  // Kubernetes quantities ("500m", "32Gi") to numbers, for usage bars; NaN when unknown.
  const SUFFIXES = {
    n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
    Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
  };
  function parseQuantity(quantity) {
    if (typeof quantity === 'number') return quantity;
    const found = /^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)([a-zA-Z]*)$/.exec(String(quantity ?? '').trim());
    if (!found || !(found[2] in SUFFIXES)) return NaN;
    return parseFloat(found[1]) * SUFFIXES[found[2]];
  }

  /** A horizontal usage bar; its width is set through the CSSOM (the CSP allows that). */
  function usageBar(used, total, label, text) {
    const ratio = total > 0 && Number.isFinite(used) ? used / total : 0;
    const shown = Math.min(1, Math.max(0, ratio));
    const fill = el('span', { class: 'fill' });
    fill.style.width = `${(shown * 100).toFixed(1)}%`;
    const level = ratio > 1 ? 'over' : ratio >= 0.9 ? 'high' : ratio >= 0.75 ? 'mid' : 'low';
    return el('span', {
      class: `bar ${level}`, role: 'meter', 'aria-label': label,
      'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': Math.round(shown * 100),
      'aria-valuetext': text,
    }, fill);
  }

  /** The message of a refused request: a Kubernetes Status body, or its text. */
  async function statusMessage(response) {
    let text = '';
    try { text = await response.text(); } catch { /* body unreadable: fall through */ }
    try {
      const body = JSON.parse(text);
      if (body && body.message) return String(body.message);
    } catch { /* not JSON */ }
    return truncate(text.trim(), 500) || `HTTP ${response.status} ${response.statusText}`.trim();
  }

  /** Reads a streamed body as text chunks until it ends; frees the connection however it ends. */
  async function readText(response, onText) {
    if (!response.body) { onText(await response.text()); return; }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        onText(decoder.decode(value, { stream: true }));
      }
      onText(decoder.decode());
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  /** Feeds text chunks; calls onLine per complete line. flush() hands over the last partial one. */
  function lineSplitter(onLine) {
    let rest = '';
    const feed = (text) => {
      rest += text;
      const lines = rest.split('\n');
      rest = lines.pop();
      for (const line of lines) onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
    };
    feed.flush = () => { if (rest) { const last = rest; rest = ''; onLine(last); } };
    return feed;
  }

  // -- watched lists ---------------------------------------------------------------

  /** A list kept current by a watch: rows by id, and how the watch is doing. */
  function makeList(name, path, idOf) {
    return { name, path, idOf, rows: new Map(), status: 'connecting', message: '' };
  }
  const lists = {
    fleet: makeList('fleet', 'fleet', (row) => row.name),
    queues: makeList('queues', 'queues', (row) => row.name),
    workloads: makeList('workloads', 'workloads', (row) => row.key),
  };

  function setListStatus(list, status, message) {
    list.status = status;
    list.message = message || '';
    updateConnection();
    markDirty(list.name);
  }

  function applyEvent(list, line) {
    if (!line.trim()) return;
    let event;
    try { event = JSON.parse(line); } catch { console.warn('jobrelay: unreadable watch line', line); return; }
    const { type, object } = event || {};
    if (type === 'ERROR') throw new Error((object && object.message) || 'the watch reported an error');
    if (!object || typeof object !== 'object') return;
    if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return; // BOOKMARK and unknown
    const id = list.idOf(object);
    if (id == null) return;
    if (type === 'DELETED') list.rows.delete(id);
    else list.rows.set(id, object);
    markDirty(list.name);
  }

  /** Watches one list forever: reconnects with a backoff, slower when refused. */
  async function watchList(list) {
    let backoff = BACKOFF_MIN_MS;
    for (;;) {
      let wait = backoff;
      try {
        const response = await fetch(new URL(`${list.path}?watch=true`, BASE), {
          cache: 'no-store', headers: { Accept: 'application/json' },
        });
        if (response.ok) {
          backoff = BACKOFF_MIN_MS;
          wait = backoff;
          // The watch re-sends every row as ADDED: start from empty (stale rows stayed
          // visible while reconnecting rather than blanking the page).
          list.rows.clear();
          setListStatus(list, 'live');
          const feed = lineSplitter((line) => applyEvent(list, line));
          await readText(response, feed);
          feed.flush();
          setListStatus(list, 'reconnecting');
        } else {
          const message = await statusMessage(response);
          if (response.status === 403 || response.status === 401) {
            list.rows.clear();
            setListStatus(list, 'forbidden', message);
            wait = Math.max(backoff, FORBIDDEN_RETRY_MS);
          } else {
            setListStatus(list, 'reconnecting', message);
          }
        }
      } catch (error) {
        setListStatus(list, 'reconnecting', `connection lost: ${error.message}`);
      }
      await sleep(wait);
      backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
    }
  }

  /** The header's aria-live status: one word for all three watches. */
  function updateConnection() {
    const states = Object.values(lists).map((list) => list.status);
    let text = 'live';
    let state = 'ok';
    if (states.includes('reconnecting')) [text, state] = ['reconnecting…', 'bad'];
    else if (states.includes('connecting')) [text, state] = ['connecting…', 'pending'];
    else if (states.every((s) => s === 'forbidden')) [text, state] = ['no access', 'bad'];
    const conn = $('conn');
    setText(conn, text);
    conn.dataset.state = state;
    conn.title = Object.values(lists).map((l) => `${l.name}: ${l.status}`).join(', ');
  }

  /** A section's note: the refusal (instead of its content) or the reconnect reason. */
  function showListNote(list, note, body) {
    const forbidden = list.status === 'forbidden';
    const text = forbidden ? list.message
      : list.status === 'reconnecting' && list.message ? `${list.message} — reconnecting…` : '';
    setText(note, text);
    note.hidden = !text;
    note.classList.toggle('error', forbidden);
    if (body) body.hidden = forbidden;
  }

  // -- rendering, coalesced to one pass a frame --------------------------------------

  const dirty = new Set();
  let frame = 0;
  function markDirty(what) {
    dirty.add(what);
    scheduleRender();
  }
  function scheduleRender() {
    if (!frame) frame = requestAnimationFrame(render);
  }

  function render() {
    frame = 0;
    if (route.page === 'overview') {
      if (dirty.has('fleet')) renderFleet();
      if (dirty.has('queues')) renderQueues();
      if (dirty.has('workloads')) renderWorkloads();
      if (restoreScroll != null) { window.scrollTo(0, restoreScroll); restoreScroll = null; }
    } else if (detail) {
      if (dirty.has('workloads') || dirty.has('events')) renderDetailHead();
      if (dirty.has('workloads') || dirty.has('events')) renderTimeline();
      if (dirty.has('events')) renderEvents();
      if (dirty.has('mirror')) renderMirror();
      if (dirty.has('logs')) renderLogs();
    }
    // A route change marks everything dirty again, so nothing is lost by clearing here.
    dirty.clear();
  }

  // -- fleet -----------------------------------------------------------------------

  function renderFleet() {
    const list = lists.fleet;
    const grid = $('worker-grid');
    showListNote(list, $('fleet-note'), grid);
    const workers = [...list.rows.values()].sort(byName);
    grid.replaceChildren(...workers.map(workerCard));
    if (!workers.length && list.status === 'live') {
      grid.append(el('p', { class: 'empty', text: 'No worker clusters are registered.' }));
    }
  }

  function stateLevel(state, connected) {
    const s = state.toLowerCase();
    if (s.startsWith('ready')) return connected ? 'ok' : 'warn';
    if (s.startsWith('cordon') || s.startsWith('drain')) return 'warn';
    if (s.startsWith('lost') || s.includes('not connected') || !connected) return 'bad';
    return 'neutral';
  }

  function workerCard(worker) {
    const connected = worker.connected === 'True';
    const state = String(worker.state || (connected ? 'Ready' : 'not connected'));
    const badges = el('span', { class: 'badges' },
      el('span', { class: `badge level-${stateLevel(state, connected)}`, text: state }));
    // Say so when the summary does not already: a stale "Ready" must not look healthy.
    if (!connected && !/lost|not connected/i.test(state)) {
      badges.append(el('span', { class: 'badge level-bad', text: 'not connected' }));
    }
    const facts = el('dl', { class: 'facts compact' });
    const fact = (term, value) => facts.append(el('dt', { text: term }), el('dd', { text: String(value) }));
    fact('version', worker.version || '—');
    fact('mirrors', worker.mirrors ?? '—');
    fact('running', worker.running ?? '—');
    if (worker.nodes != null) fact('nodes', `${worker.schedulableNodes ?? '?'}/${worker.nodes} schedulable`);

    const card = el('article', { class: `worker${connected ? '' : ' disconnected'}`, 'data-worker': worker.name },
      el('h3', {}, el('span', { class: 'worker-name', text: worker.name }), badges),
      facts);
    if (worker.message) card.append(el('p', { class: 'message', title: worker.message, text: truncate(String(worker.message), 200) }));

    const resources = Array.isArray(worker.resources) ? worker.resources : [];
    if (resources.length) {
      const box = el('div', { class: 'resources' });
      for (const r of resources) {
        const text = String(r.text ?? `${r.used}/${r.allocatable}`);
        box.append(el('div', { class: 'resource' },
          el('span', { class: 'resource-name', text: r.name }),
          usageBar(Number(r.used), Number(r.allocatable), `${r.name} on ${worker.name}`, text),
          el('span', { class: 'resource-text', text })));
      }
      card.append(box);
    } else {
      card.append(el('p', { class: 'muted', text: 'capacity unknown' }));
    }
    return card;
  }

  // -- queues ----------------------------------------------------------------------

  function renderQueues() {
    const list = lists.queues;
    const section = $('queues');
    const queues = [...list.rows.values()].sort(byName);
    // No queues defined: the section would only be noise.
    section.hidden = list.status !== 'forbidden' && queues.length === 0;
    showListNote(list, $('queues-note'), $('queues-body'));
    if (section.hidden || list.status === 'forbidden') return;
    $('queue-table').tBodies[0].replaceChildren(...queues.map(queueRow));
    if (!samples.length) takeSample();
    renderChart();
  }

  function queueRow(queue) {
    const name = el('th', { scope: 'row' }, queue.name);
    if (queue.valid === false) {
      name.append(' ', el('span', { class: 'badge level-bad', title: queue.message || '', text: 'invalid' }));
    }
    if (queue.message) name.append(el('div', { class: 'message', text: truncate(String(queue.message), REASON_CHARS) }));
    const over = typeof queue.actualShare === 'number' && typeof queue.fairShare === 'number'
      && queue.actualShare > queue.fairShare;
    return el('tr', { 'data-queue': queue.name },
      name,
      el('td', { class: 'num', text: queue.weight ?? '—' }),
      el('td', { class: 'num', text: queue.pending ?? 0 }),
      el('td', { class: 'num', text: queue.admitted ?? 0 }),
      usageCell(queue),
      el('td', { class: 'num', text: pct(queue.fairShare) }),
      el('td', { class: `num${over ? ' over' : ''}`, text: pct(queue.actualShare) }));
  }

  function usageCell(queue) {
    const usage = queue.usage || {};
    const nominal = queue.nominalQuota || {};
    const borrow = queue.borrowingLimit || {};
    const names = [...new Set([...Object.keys(nominal), ...Object.keys(usage)])].sort();
    const cell = el('td', { class: 'usage' });
    if (!names.length) cell.append('—');
    for (const resource of names) {
      let text = `${resource} ${usage[resource] ?? '0'} / ${nominal[resource] ?? '—'}`;
      if (borrow[resource] != null) text += ` (+${borrow[resource]} borrowable)`;
      cell.append(el('div', { class: 'usage-line' },
        usageBar(parseQuantity(usage[resource] ?? 0), parseQuantity(nominal[resource]), `${resource} of ${queue.name}`, text),
        el('span', { text })));
    }
    return cell;
  }

  // Share history, sampled client-side: [{t, values: Map(queue -> share|null)}].
  const samples = [];
  const seriesIndex = new Map(); // queue -> colour, stable while the page is open

  function takeSample() {
    if (!lists.queues.rows.size) return;
    const now = Date.now();
    const values = new Map();
    for (const q of lists.queues.rows.values()) {
      values.set(q.name, typeof q.actualShare === 'number' ? q.actualShare : null);
      if (!seriesIndex.has(q.name)) seriesIndex.set(q.name, seriesIndex.size % SERIES_COLORS);
    }
    samples.push({ t: now, values });
    while (samples.length && samples[0].t < now - HISTORY_MS) samples.shift();
  }

  function renderChart() {
    const chart = $('share-chart');
    const [W, H, L, R, T, B] = [600, 180, 42, 10, 10, 22];
    const now = Date.now();
    const t0 = now - HISTORY_MS;
    const names = [...new Set(samples.flatMap((s) => [...s.values.keys()]))].sort();
    let max = 0;
    for (const s of samples) for (const v of s.values.values()) if (v != null) max = Math.max(max, v);
    const yMax = Math.max(0.25, Math.ceil(max * 4) / 4); // quarter steps keep labels round
    const x = (t) => L + ((t - t0) / HISTORY_MS) * (W - L - R);
    const y = (v) => T + (1 - v / yMax) * (H - T - B);

    const parts = [];
    for (const v of [0, yMax / 2, yMax]) {
      parts.push(svg('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      parts.push(svg('text', { class: 'axis', x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, pct(v)));
    }
    for (const [t, label] of [[t0, '−10m'], [now - HISTORY_MS / 2, '−5m'], [now, 'now']]) {
      parts.push(svg('text', { class: 'axis', x: x(t), y: H - 6, 'text-anchor': t === t0 ? 'start' : t === now ? 'end' : 'middle' }, label));
    }
    for (const name of names) {
      const series = `series-${seriesIndex.get(name) ?? 0}`;
      let d = '';
      let last = null;
      for (const s of samples) {
        const v = s.values.get(name);
        if (v == null) { last = null; continue; }
        // A gap (hidden tab, throttled timer, queue absent) breaks the line instead of bridging it.
        const move = !last || s.t - last.t > SAMPLE_MS * 2.5;
        d += `${move ? 'M' : 'L'}${x(s.t).toFixed(1)},${y(v).toFixed(1)}`;
        last = { t: s.t, v };
      }
      if (d) parts.push(svg('path', { class: `line ${series}`, d }));
      if (last) parts.push(svg('circle', { class: `dot ${series}`, cx: x(last.t), cy: y(last.v), r: 2.5 }));
    }
    chart.replaceChildren(...parts);

    $('share-legend').replaceChildren(...names.map((name) => {
      const latest = samples.length ? samples[samples.length - 1].values.get(name) : null;
      return el('li', {},
        el('span', { class: `swatch series-${seriesIndex.get(name) ?? 0}`, 'aria-hidden': 'true' }),
        `${name} ${pct(latest)}`);
    }));
  }

  // -- workloads -------------------------------------------------------------------

  const filters = { namespace: '', queue: '', state: '', worker: '', search: '', heldReason: null };
  let rowCache = new Map(); // key -> {row, tr, ageCell}: unchanged rows keep their elements

  function matches(w) {
    if (filters.namespace && w.namespace !== filters.namespace) return false;
    if (filters.queue && (w.queue || NONE) !== filters.queue) return false;
    if (filters.state && w.state !== filters.state) return false;
    if (filters.worker && (w.worker || NONE) !== filters.worker) return false;
    if (filters.search && !String(w.name).toLowerCase().includes(filters.search)) return false;
    if (filters.heldReason != null && (w.state !== 'Held' || (w.reason || '') !== filters.heldReason)) return false;
    return true;
  }

  // Newest first; ISO timestamps in UTC compare as strings.
  function newestFirst(a, b) {
    const ca = String(a.created || '');
    const cb = String(b.created || '');
    return ca < cb ? 1 : ca > cb ? -1 : String(a.key).localeCompare(String(b.key));
  }

  function renderWorkloads() {
    const list = lists.workloads;
    showListNote(list, $('workloads-note'), $('workloads-body'));
    if (list.status === 'forbidden') return;
    const all = [...list.rows.values()];
    updateFilterOptions(all);
    renderHeld(all);

    const matching = all.filter(matches).sort(newestFirst);
    const shown = matching.slice(0, MAX_ROWS);
    const now = Date.now();
    const nextCache = new Map();
    const rows = shown.map((w) => {
      const entry = workloadRow(w, now);
      nextCache.set(w.key, entry);
      return entry.tr;
    });
    rowCache = nextCache;
    syncChildren($('workload-table').tBodies[0], rows);

    let count = `showing ${shown.length.toLocaleString()} of ${matching.length.toLocaleString()}`;
    if (matching.length !== all.length) count += ` (${all.length.toLocaleString()} in all)`;
    setText($('workload-count'), count);
    $('workload-empty').hidden = matching.length > 0 || list.status !== 'live';
  }

  /** Puts exactly `nodes` under `parent`, in order, moving only what must move (keeps focus). */
  function syncChildren(parent, nodes) {
    let cursor = parent.firstChild;
    for (const node of nodes) {
      if (node === cursor) { cursor = cursor.nextSibling; continue; }
      parent.insertBefore(node, cursor);
    }
    while (cursor) {
      const next = cursor.nextSibling;
      parent.removeChild(cursor);
      cursor = next;
    }
  }

  function workloadHref(w) {
    return `#/workload/${encodeURIComponent(w.plural)}/${encodeURIComponent(w.namespace)}/${encodeURIComponent(w.name)}`;
  }

  /** Where it runs; while it waits, when it is likely to start (its basis in the title). */
  function workerCell(w) {
    if (w.worker || w.estimateBasis == null) return el('td', { text: w.worker || '—' });
    const at = Date.parse(w.estimatedStart);
    const text = Number.isFinite(at)
      ? `starts ~${new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}`
      : 'start unknown';
    return el('td', { class: 'estimate', title: `estimated start; basis: ${w.estimateBasis}`, text });
  }

  function workloadRow(w, now) {
    const cached = rowCache.get(w.key);
    if (cached && cached.row === w) { // watch events replace rows, so identity means unchanged
      setText(cached.ageCell, age(w.created, now));
      return cached;
    }
    const ageCell = el('td', { title: w.created || '', text: age(w.created, now) });
    const tr = el('tr', { 'data-key': w.key, 'data-state': w.state },
      el('td', { text: w.kind }),
      el('td', { text: w.namespace }),
      el('th', { scope: 'row' }, el('a', { href: workloadHref(w), text: w.name })),
      el('td', { class: 'state', title: w.reason || null, text: w.state }),
      workerCell(w),
      el('td', { text: w.queue || '—' }),
      el('td', { text: w.completions ?? '' }),
      ageCell);
    return { row: w, tr, ageCell };
  }

  const FILTER_SELECTS = [
    ['namespace', 'f-namespace', (w) => w.namespace, null],
    ['queue', 'f-queue', (w) => w.queue || NONE, '(no queue)'],
    ['state', 'f-state', (w) => w.state, null],
    ['worker', 'f-worker', (w) => w.worker || NONE, '(not placed)'],
  ];

  /** Fills the filter <select>s from the data; rebuilt only when their values change. */
  function updateFilterOptions(all) {
    for (const [field, id, valueOf, noneLabel] of FILTER_SELECTS) {
      const values = new Set(all.map(valueOf).filter((v) => v != null && v !== ''));
      if (field === 'state') for (const s of KNOWN_STATES) values.add(s);
      if (filters[field]) values.add(filters[field]); // never drop the chosen one silently
      const sorted = field === 'state'
        ? [...values].sort((a, b) => stateOrder(a) - stateOrder(b) || a.localeCompare(b))
        : [...values].sort((a, b) => (a === NONE) - (b === NONE) || a.localeCompare(b));
      const select = $(id);
      const signature = sorted.join('\n');
      if (select.dataset.signature === signature) continue;
      select.dataset.signature = signature;
      select.replaceChildren(el('option', { value: '', text: 'all' }),
        ...sorted.map((v) => el('option', { value: v, text: v === NONE ? noneLabel : v })));
      select.value = filters[field];
    }
  }

  function stateOrder(state) {
    const i = KNOWN_STATES.indexOf(state);
    return i < 0 ? KNOWN_STATES.length : i;
  }

  /** The held summary: one button per distinct reason, most common first. */
  function renderHeld(all) {
    const counts = new Map();
    for (const w of all) if (w.state === 'Held') counts.set(w.reason || '', (counts.get(w.reason || '') || 0) + 1);
    const entries = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    const box = $('held');
    box.hidden = !entries.length && filters.heldReason == null;
    $('held-active').hidden = filters.heldReason == null;

    const signature = JSON.stringify([entries, filters.heldReason]);
    if (box.dataset.signature === signature) return; // rebuilding would steal keyboard focus
    box.dataset.signature = signature;
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.reason : undefined;
    const items = entries.map(([reason, count]) => el('li', {},
      el('button', {
        type: 'button', class: 'held-reason', 'data-reason': reason, title: reason || null,
        'aria-pressed': String(filters.heldReason === reason),
      }, el('span', { class: 'count-badge', text: count.toLocaleString() }), ' ',
      truncate(reason || '(no reason given)', REASON_CHARS))));
    $('held-list').replaceChildren(...items);
    if (focused !== undefined) {
      const again = [...$('held-list').querySelectorAll('button')].find((b) => b.dataset.reason === focused);
      if (again) again.focus();
    }
  }

  function wireFilters() {
    for (const [field, id] of FILTER_SELECTS) {
      $(id).addEventListener('change', (event) => {
        filters[field] = event.target.value;
        markDirty('workloads');
      });
    }
    $('f-search').addEventListener('input', (event) => {
      filters.search = event.target.value.trim().toLowerCase();
      markDirty('workloads');
    });
    $('held-list').addEventListener('click', (event) => {
      const button = event.target.closest('button[data-reason]');
      if (!button) return;
      const reason = button.dataset.reason;
      filters.heldReason = filters.heldReason === reason ? null : reason;
      // Another state chosen would hide every held workload: widen it.
      if (filters.heldReason != null && filters.state && filters.state !== 'Held') {
        filters.state = '';
        $('f-state').value = '';
      }
      markDirty('workloads');
    });
    $('held-clear').addEventListener('click', () => {
      filters.heldReason = null;
      markDirty('workloads');
    });
  }

  // -- detail page -----------------------------------------------------------------

  // The open detail page: everything it fetches is aborted through `controller` on leaving.
  let detail = null;

  function openDetail(r) {
    closeDetail();
    const path = `namespaces/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.plural)}/${encodeURIComponent(r.name)}`;
    detail = {
      ...r, key: `${r.plural}/${r.namespace}/${r.name}`, path,
      controller: new AbortController(), timer: 0,
      events: null, eventsError: '', eventsSignature: '',
      mirror: null, mirrorError: '', mirrorSignature: '',
      log: null, factsRow: null, timelineSignature: '',
    };
    $('events').tBodies[0].replaceChildren();
    $('mirror').replaceChildren(el('p', { class: 'muted', text: 'loading…' }));
    $('events-note').hidden = true;
    refreshDetail(detail);
    startLogs(detail);
  }

  function closeDetail() {
    if (!detail) return;
    detail.controller.abort();
    if (detail.log) detail.log.controller.abort();
    clearTimeout(detail.timer);
    detail = null;
  }

  /** GETs JSON; a refusal becomes {error} with the Status message. Aborts propagate. */
  async function getJSON(path, signal) {
    try {
      const response = await fetch(new URL(path, BASE), { signal, cache: 'no-store', headers: { Accept: 'application/json' } });
      if (!response.ok) return { error: await statusMessage(response) };
      return { data: await response.json() };
    } catch (error) {
      if (error.name === 'AbortError') throw error;
      return { error: `the request failed: ${error.message}` };
    }
  }

  /** Events and the mirror now, and again every few seconds while this page stays open. */
  async function refreshDetail(session) {
    const { signal } = session.controller;
    try {
      const [events, mirror] = await Promise.all([
        getJSON(`${session.path}/events`, signal),
        getJSON(`${session.path}/mirror`, signal),
      ]);
      applyDetailAnswer(session, 'events', events, (data) => (Array.isArray(data.items) ? data.items : []));
      applyDetailAnswer(session, 'mirror', mirror, (data) => data);
    } catch (error) {
      if (error.name === 'AbortError') return;
      console.error(error);
    }
    if (!signal.aborted) session.timer = setTimeout(() => refreshDetail(session), DETAIL_REFRESH_MS);
  }

  /** Stores an answer and re-renders only when it differs (keeps text selections intact). */
  function applyDetailAnswer(session, what, answer, pick) {
    const value = answer.error ? null : pick(answer.data || {});
    const signature = JSON.stringify([answer.error || '', value]);
    if (session[`${what}Signature`] === signature) return;
    session[`${what}Signature`] = signature;
    session[what] = value;
    session[`${what}Error`] = answer.error || '';
    markDirty(what);
  }

  function currentWorkload() {
    return detail ? lists.workloads.rows.get(detail.key) : undefined;
  }

  function renderDetailHead() {
    const w = currentWorkload();
    const kind = w ? w.kind : detail.plural;
    const title = `${kind} ${detail.namespace}/${detail.name}`;
    setText($('detail-title'), title);
    document.title = `${title} · jobrelay`;
    const state = $('detail-state');
    setText(state, w ? String(w.state) : '');
    state.dataset.state = w ? w.state : '';

    const reason = $('detail-reason');
    let text = w ? String(w.reason || '') : '';
    if (!w && lists.workloads.status === 'live') text = 'Not in the list of workloads now (deleted, or not visible to you).';
    setText(reason, text);
    reason.hidden = !text;

    const facts = $('detail-facts');
    if (detail.factsRow === w) return; // other workloads changed: keep the DOM (and any selection)
    detail.factsRow = w;
    if (!w) { facts.replaceChildren(); return; }
    const pairs = [
      ['Queue', w.queue || '—'], ['Worker', w.worker || '—'], ['Completions', w.completions || '—'],
      ['Created', w.created ? new Date(w.created).toLocaleString() : '—'],
    ];
    facts.replaceChildren(...pairs.flatMap(([term, value]) => [el('dt', { text: term }), el('dd', { text: value })]));
  }

  const wordPatterns = new Map();
  /** Whether an event is about worker `name`: from its side, or the name as a word in its message. */
  function mentions(event, name) {
    if (event.side === name) return true;
    let pattern = wordPatterns.get(name);
    if (!pattern) {
      pattern = new RegExp(`(?<![\\w.-])${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w-])`);
      wordPatterns.set(name, pattern);
    }
    return pattern.test(String(event.message || ''));
  }

  const eventTime = (e) => Date.parse(e.lastTimestamp) || 0;

  /**
   * Assigns each placement event a run (index into placements, -1 before the first). Events
   * carry no run number, so: a Dispatched/Placed/Moved naming the next run's worker starts it,
   * once the current run ended (Preempted, Lost, …) or the next run is on another worker.
   */
  function assignRuns(events, placements) {
    let run = -1;
    let ended = true;
    return events.map((event) => {
      const next = placements[run + 1];
      if (next != null && RUN_STARTS.has(event.reason) && mentions(event, next)
          && (ended || next !== placements[run])) {
        run += 1;
        ended = false;
      } else if (RUN_ENDS.has(event.reason)) {
        ended = true;
      }
      return { event, run };
    });
  }

  function renderTimeline() {
    const w = currentWorkload();
    const placements = w && Array.isArray(w.placements) ? w.placements : [];
    const current = w && w.worker && placements[placements.length - 1] === w.worker ? placements.length - 1 : -1;
    const signature = JSON.stringify([placements, current, detail.eventsSignature]);
    if (detail.timelineSignature === signature) return; // rebuilt only when its inputs change
    detail.timelineSignature = signature;
    const events = (detail.events || []).filter((e) => TIMELINE_REASONS.has(e.reason))
      .sort((a, b) => eventTime(a) - eventTime(b));
    const box = $('timeline');
    if (!placements.length && !events.length) {
      box.replaceChildren(el('p', { class: 'muted', text: 'Not placed on a worker yet.' }));
      return;
    }
    const runLabel = (i) => `run ${i + 1} on ${placements[i]}`;
    const summary = el('ol', { class: 'runs', 'aria-label': 'Runs' }, ...placements.map((name, i) =>
      el('li', { class: i === current ? 'current' : null, 'aria-current': i === current ? 'step' : null },
        runLabel(i), i === current ? ' (current)' : '')));

    const byRun = new Map();
    for (const { event, run } of assignRuns(events, placements)) {
      if (!byRun.has(run)) byRun.set(run, []);
      byRun.get(run).push(event);
    }
    const groups = el('ol', { class: 'timeline' });
    for (let i = -1; i < placements.length; i++) {
      const items = byRun.get(i) || [];
      if (i === -1 && !items.length) continue;
      const head = i === -1 ? 'Before the first run' : runLabel(i) + (i === current ? ' (current)' : '');
      groups.append(el('li', { class: i === current ? 'current' : null },
        el('div', { class: 'run-head', text: head }),
        items.length ? el('ul', { class: 'run-events' }, ...items.map(timelineItem)) : null));
    }
    box.replaceChildren(summary, groups);
  }

  function timelineItem(event) {
    const t = Date.parse(event.lastTimestamp);
    return el('li', { class: event.type === 'Warning' ? 'warning' : null },
      Number.isFinite(t) ? el('time', { datetime: event.lastTimestamp, text: new Date(t).toLocaleTimeString() }) : null,
      ' ', el('strong', { text: event.reason }), ` (${event.side}) `, String(event.message || ''));
  }

  function renderEvents() {
    const note = $('events-note');
    setText(note, detail.eventsError);
    note.hidden = !detail.eventsError;
    note.classList.toggle('error', !!detail.eventsError);
    const events = [...(detail.events || [])].sort((a, b) => eventTime(b) - eventTime(a));
    const rows = events.map((e) => el('tr', { 'data-side': e.side, class: e.type === 'Warning' ? 'warning' : null },
      el('td', { text: e.side }),
      el('td', { text: e.type }),
      el('td', { text: e.reason }),
      el('td', { text: e.object }),
      el('td', { class: 'message', text: e.message }),
      el('td', { class: 'num', text: e.count ?? '' }),
      timeCell(e.lastTimestamp)));
    if (!rows.length && detail.events) {
      rows.push(el('tr', {}, el('td', { colspan: 7, class: 'muted', text: 'No events.' })));
    }
    $('events').tBodies[0].replaceChildren(...rows);
  }

  function renderMirror() {
    const box = $('mirror');
    if (detail.mirrorError) {
      box.replaceChildren(el('p', { class: 'note', text: detail.mirrorError }));
      return;
    }
    const data = detail.mirror;
    if (!data) return;
    const mirror = data.mirror || {};
    const meta = mirror.metadata || {};
    const facts = el('dl', { class: 'facts' },
      el('dt', { text: 'Cluster' }), el('dd', { text: data.cluster || '—' }),
      el('dt', { text: 'Object' }), el('dd', { text: `${mirror.kind || ''} ${meta.namespace || ''}/${meta.name || ''}`.trim() }),
      el('dt', { text: 'Status' }), el('dd', { text: summarizeStatus(mirror.status) }));
    const pods = Array.isArray(data.pods) ? data.pods : [];
    const head = el('tr', {}, ...['Pod', 'Phase', 'Node', 'Ready', 'Restarts', 'Last state', 'Conditions not true']
      .map((h) => el('th', { scope: 'col', text: h })));
    const rows = pods.map((p) => el('tr', { 'data-phase': p.phase || '' },
      el('th', { scope: 'row', text: p.name }),
      el('td', { text: p.phase || '' }),
      el('td', { text: p.node || '—' }),
      el('td', { text: p.ready || '' }),
      el('td', { class: 'num', text: p.restarts ?? 0 }),
      el('td', { text: describeLastState(p.lastState, 0) || '—' }),
      el('td', { text: describeConditions(p.conditions) })));
    const table = pods.length
      ? el('div', { class: 'table-wrap' }, el('table', { class: 'pods' },
        el('caption', { class: 'sr-only', text: 'Pods of the mirror' }),
        el('thead', {}, head), el('tbody', {}, ...rows)))
      : el('p', { class: 'muted', text: 'No pods.' });
    box.replaceChildren(facts, table);
  }

  /** A one-line status of the mirror: its scalar fields and its true conditions. */
  function summarizeStatus(status) {
    if (!status || typeof status !== 'object') return '—';
    const parts = [];
    for (const [key, value] of Object.entries(status)) {
      if (typeof value === 'number' || typeof value === 'boolean'
          || (typeof value === 'string' && value.length < 60 && !key.endsWith('Time'))) {
        parts.push(`${key}: ${value}`);
      }
    }
    const conditions = Array.isArray(status.conditions) ? status.conditions : [];
    const held = conditions.filter((c) => c.status === 'True').map((c) => c.type);
    if (held.length) parts.push(`conditions: ${held.join(', ')}`);
    return parts.join(' · ') || '—';
  }

  /** "terminated OOMKilled (exit 137)"; also accepts the states keyed by container name. */
  function describeLastState(state, depth) {
    if (!state || typeof state !== 'object' || depth > 1) return '';
    const parts = [];
    for (const [key, value] of Object.entries(state)) {
      if (!value || typeof value !== 'object') continue;
      if (key === 'terminated' || key === 'waiting' || key === 'running') {
        let text = key;
        if (value.reason) text += ` ${value.reason}`;
        if (value.exitCode != null) text += ` (exit ${value.exitCode})`;
        parts.push(text);
      } else {
        const inner = describeLastState(value, depth + 1);
        if (inner) parts.push(`${key}: ${inner}`);
      }
    }
    return parts.join('; ');
  }

  function describeConditions(conditions) {
    if (!Array.isArray(conditions)) return '—';
    const notTrue = conditions.filter((c) => c.status !== 'True')
      .map((c) => `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ''}`);
    return notTrue.join(', ') || '—';
  }

  // -- logs ------------------------------------------------------------------------

  let followLogs = true;

  /** Streams the pods' logs into the page; a new call replaces the previous stream. */
  async function startLogs(session) {
    if (session.log) session.log.controller.abort();
    const log = { controller: new AbortController(), lines: [], dropped: 0 };
    session.log = log; // closeDetail aborts it
    // A replaced stream (Reload) must not write over its successor's status.
    const status = (text, isError) => { if (session.log === log) setLogStatus(text, isError); };
    status('connecting…');
    markDirty('logs');
    const url = new URL(`${session.path}/log?follow=true&allPods=true&tailLines=500`, BASE);
    try {
      const response = await fetch(url, { signal: log.controller.signal, cache: 'no-store' });
      if (!response.ok) {
        status(await statusMessage(response), true);
        return;
      }
      status('following');
      const feed = lineSplitter((line) => log.lines.push(line));
      await readText(response, (text) => {
        feed(text);
        trimLog(log);
        markDirty('logs');
      });
      feed.flush();
      trimLog(log);
      markDirty('logs');
      status('the log ended (its pods are done); Reload to read it again');
    } catch (error) {
      if (error.name === 'AbortError') return;
      status(`the log stream broke: ${error.message}`, true);
    }
  }

  function trimLog(log) {
    const extra = log.lines.length - MAX_LOG_LINES;
    if (extra > 0) {
      log.lines.splice(0, extra);
      log.dropped += extra;
    }
  }

  function setLogStatus(text, isError = false) {
    const status = $('log-status');
    setText(status, text);
    status.classList.toggle('error', isError);
  }

  function renderLogs() {
    const log = detail.log;
    if (!log) return;
    const pre = $('logs');
    const head = log.dropped ? `… ${log.dropped.toLocaleString()} earlier lines not kept (showing the last ${MAX_LOG_LINES})\n` : '';
    pre.textContent = head + log.lines.join('\n');
    if (followLogs) pre.scrollTop = pre.scrollHeight;
  }

  function wireLogs() {
    const follow = $('log-follow');
    follow.addEventListener('click', () => {
      followLogs = !followLogs;
      follow.setAttribute('aria-pressed', String(followLogs));
      if (followLogs) $('logs').scrollTop = $('logs').scrollHeight;
    });
    $('log-reload').addEventListener('click', () => { if (detail) startLogs(detail); });
  }

  // -- routing ---------------------------------------------------------------------

  let route = { page: 'overview' };
  let overviewScroll = 0;
  let restoreScroll = null;

  function parseRoute(hash) {
    const parts = hash.replace(/^#\/?/, '').split('/');
    if (parts[0] === 'workload' && parts.length === 4 && parts.slice(1).every(Boolean)) {
      try {
        const [plural, namespace, name] = parts.slice(1).map(decodeURIComponent);
        return { page: 'detail', plural, namespace, name };
      } catch { /* malformed escape: show the overview */ }
    }
    return { page: 'overview' };
  }

  function onRoute(initial) {
    const next = parseRoute(location.hash);
    if (route.page === 'overview' && next.page !== 'overview') overviewScroll = window.scrollY;
    route = next;
    const onDetail = route.page === 'detail';
    $('overview').hidden = onDetail;
    $('detail').hidden = !onDetail;
    if (onDetail) {
      const key = `${route.plural}/${route.namespace}/${route.name}`;
      if (!detail || detail.key !== key) openDetail(route);
      window.scrollTo(0, 0);
    } else {
      closeDetail();
      document.title = 'jobrelay';
      if (!initial) restoreScroll = overviewScroll;
    }
    for (const what of ['fleet', 'queues', 'workloads', 'events', 'mirror', 'logs']) dirty.add(what);
    scheduleRender();
    // Move focus to the new page's heading so keyboard and screen reader users follow along.
    if (!initial) $(onDetail ? 'detail-title' : 'fleet-title').focus({ preventScroll: true });
  }

  // -- start -----------------------------------------------------------------------

  function start() {
    $('app').hidden = false;
    wireFilters();
    wireLogs();
    window.addEventListener('hashchange', () => onRoute(false));
    onRoute(true);
    updateConnection();
    for (const list of Object.values(lists)) watchList(list);
    // Client-side share history, and ages that keep counting between watch events.
    setInterval(() => {
      takeSample();
      if (route.page === 'overview') {
        markDirty('workloads');
        if (!$('queues').hidden) renderChart();
      }
    }, SAMPLE_MS);
  }

  start();
})();
