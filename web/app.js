/*
 * web/app.js: the page of `ember serve` (docs/web.md). One state object,
 * held whole in the URL's query string: every change that a person makes
 * is a history entry (pushState), so a link reproduces the view and the
 * back button undoes. A run asks the server two things at once: the
 * totals over time (`sum by (L) (total(SELECTOR))` with a step) for the
 * chart, and the profile as levels (format=levels) for the flame graph
 * and the table; in compare mode the profile is a diff(...) of two ranges
 * or two queries. Frame actions (focus, ignore, hide, show) wrap the query
 * text in the language's functions, so what is shown is always a query
 * that can be copied to `ember query`.
 *
 * window.ember exposes the state and what was drawn, for the browser tests
 * (tests/e2e/web_page.sh) and the measurements (bench/web.sh).
 */
'use strict';
(function () {
  const A = window.EmberApi, $ = (id) => document.getElementById(id);
  const KEYS = ['q', 'from', 'to', 'by', 'cmp', 'bfrom', 'bto', 'cfrom',
                'cto', 'bq', 'g', 'z', 's', 'v', 'o', 'sort', 'sw', 'src'];
  const RUN_KEYS = ['q', 'from', 'to', 'by', 'cmp', 'bfrom', 'bto', 'cfrom',
                    'cto', 'bq', 'g'];
  const FUNCS = ['merge', 'diff', 'focus', 'ignore', 'hide', 'show', 'top',
    'total', 'rate', 'sum', 'avg', 'max', 'min', 'count', 'topk', 'bottomk',
    'callers', 'callees', 'profile_types', 'label_names', 'label_values'];
  const COLORS = ['#e8590c', '#1c7ed6', '#2f9e44', '#ae3ec9', '#f08c00',
    '#0c8599', '#e03131', '#5c940d', '#6741d9', '#c2255c', '#868e96'];

  const ember = window.ember = {
    state: {}, timing: { start: performance.timeOrigin }, runs: 0,
    flame: null, table: null, chart: null, last: null, error: null,
  };
  let types = [], labelNames = null, valuesCache = {}, runCtl = null;
  let chartRange = null, lastRunKey = null;

  /* ---- state <-> URL ---------------------------------------------------- */

  function readURL() {
    const p = new URLSearchParams(location.search), s = {};
    for (const k of KEYS) s[k] = p.get(k) || '';
    if (!p.has('from') && !p.has('to')) { s.from = 'now-1h'; s.to = 'now'; }
    try { s.z = s.z ? JSON.parse(s.z) : []; } catch (e) { s.z = []; }
    s.v = s.v || 'both'; s.o = s.o || 'icicle'; s.sort = s.sort || '-flat';
    return s;
  }

  function urlOf(s) {
    const p = new URLSearchParams();
    for (const k of KEYS) {
      let v = s[k];
      if (k === 'z') v = v && v.length ? JSON.stringify(v) : '';
      if (k === 'v' && v === 'both') v = '';
      if (k === 'o' && v === 'icicle') v = '';
      if (k === 'sort' && v === '-flat') v = '';
      if (v || ((k === 'from' || k === 'to') && v === '' && !s.from && !s.to)) p.set(k, v);
    }
    return '?' + p.toString();
  }

  /* Makes S the state: a new history entry (PUSH) or this one replaced. */
  function commit(s, push) {
    ember.state = s;
    const u = urlOf(s);
    if (u !== location.search) {
      if (push) history.pushState(null, '', u); else history.replaceState(null, '', u);
    }
  }

  function change(patch, push) {
    commit(Object.assign({}, ember.state, patch), push !== false);
    apply();
  }

  const runKey = (s) => JSON.stringify(RUN_KEYS.map((k) => s[k]));

  /* Brings the page to ember.state: controls, then a run if what is asked
   * of the server changed, else only a redraw. */
  function apply() {
    const s = ember.state;
    showControls(s);
    if (runKey(s) !== lastRunKey) run();
    else afterData();
  }

  /* ---- controls --------------------------------------------------------- */

  function showControls(s) {
    $('q').value = s.q;
    $('from').value = shown(s.from); $('to').value = shown(s.to);
    $('preset').value = presetOf(s.from, s.to);
    setSelect($('by'), s.by);
    $('cmp').checked = !!s.cmp;
    $('cmpbar').hidden = !s.cmp;
    $('cmpmode').value = s.cmp || 'range';
    $('cmpranges').hidden = s.cmp !== 'range';
    $('cmpqueries').hidden = s.cmp !== 'query';
    $('bfrom').value = shown(s.bfrom); $('bto').value = shown(s.bto);
    $('cfrom').value = shown(s.cfrom); $('cto').value = shown(s.cto);
    $('bq').value = s.bq;
    if (document.activeElement !== $('search')) $('search').value = s.s;
    $('main').className = s.v;
    $('gran').value = s.g;
    for (const b of $('views').children) b.classList.toggle('on', b.dataset.v === s.v);
    for (const b of $('orient').children) b.classList.toggle('on', b.dataset.o === s.o);
    const t = typeOf(s.q);
    if (t && types.includes(t)) $('type').value = t;
  }

  /* A time for people: unix milliseconds (what a drag sets) as RFC 3339,
   * which the server reads as well; anything else as it is. */
  function shown(t) {
    return /^\d{12,13}$/.test(t) ? new Date(Number(t)).toISOString() : t;
  }

  function setSelect(sel, v) {
    if (v && ![...sel.options].some((o) => o.value === v)) sel.add(new Option(v, v));
    sel.value = v;
  }

  function presetOf(from, to) {
    if (!from && !to) return 'all';
    const m = /^now-(\w+)$/.exec(from);
    if (m && to === 'now' && [...$('preset').options].some((o) => o.value === m[1])) return m[1];
    return '';
  }

  function typeOf(q) {
    const sel = A.selectors(q)[0];
    return sel ? sel.type : q.trim();
  }

  /* Q with every selector's type set to T (a new TYPE{} when empty). */
  function withType(q, t) {
    const sels = A.selectors(q);
    if (!q.trim()) return t + '{}';
    if (!sels.length) return /^[\w:.]+$/.test(q.trim()) ? t + '{}' : q;
    let out = '', at = 0;
    for (const s of sels) { out += q.slice(at, s.start) + t + '{' + s.body + '}'; at = s.end; }
    return out + q.slice(at);
  }

  /* ---- running ---------------------------------------------------------- */

  function range(s, now) {
    const f = A.time(s.from, now), t = A.time(s.to, now);
    return { from: f, to: t, all: isNaN(f) && isNaN(t) };
  }

  function timeParams(r) {
    const p = {};
    if (!isNaN(r.from)) p.from = String(Math.round(r.from));
    if (!isNaN(r.to)) p.to = String(Math.round(r.to));
    return p;
  }

  /* The profile query: the bar's, or the diff compare mode makes; at the
   * granularity chosen (granularity() applies to the whole of it). */
  function profileQuery(s, now) {
    const q = s.q.trim();
    let p = q;
    if (s.cmp === 'query' && s.bq.trim()) p = 'diff(' + s.bq.trim() + ', ' + q + ')';
    if (s.cmp === 'range') {
      const b = [A.time(s.bfrom, now), A.time(s.bto, now)];
      const c = [A.time(s.cfrom, now), A.time(s.cto, now)];
      if (![...b, ...c].some(isNaN))
        p = 'diff(' + A.withRange(q, b[0], b[1]) + ', ' + A.withRange(q, c[0], c[1]) + ')';
    }
    return s.g ? 'granularity(' + p + ', "' + s.g + '")' : p;
  }

  /* The function a frame's name holds at granularity G: filters match
   * function names whatever the granularity ("main.fib /src/main.go:55"
   * is main.fib's; an address comes first). A file has none. */
  function fnName(name, g) {
    const w = name.split(' ');
    if (g === 'addresses' && w.length > 1) return w[1];
    if (g === 'filefunctions' || g === 'lines') return w[0];
    return name;
  }

  function totalsQuery(s) {
    const sel = A.firstSelector(s.q);
    return s.by ? 'sum by (' + s.by + ') (total(' + sel + '))' : 'sum(total(' + sel + '))';
  }

  async function run() {
    const s = ember.state, now = Date.now(), r = range(s, now);
    lastRunKey = runKey(s);
    if (!s.q.trim()) { setBusy(false); return; }
    if (runCtl) runCtl.abort();
    const ctl = runCtl = new AbortController();
    setBusy(true);
    showError(null);
    const tp = timeParams(r), pq = profileQuery(s, now);
    const sp = Object.assign({ format: 'json' }, tp);
    if (!r.all && !isNaN(r.from) && !isNaN(r.to)) sp.step = A.durationText(A.step(r.to - r.from));
    const series = A.query(totalsQuery(s), sp, ctl.signal).catch((e) => e);
    const prof = A.query(pq, Object.assign({ format: 'levels' }, tp), ctl.signal).catch((e) => e);
    const [sr, pr] = await Promise.all([series, prof]);
    if (ctl !== runCtl) return;                 // a newer run took over
    ember.last = { query: pq, totals: totalsQuery(s), from: tp.from, to: tp.to, now };
    if (pr instanceof Error) {
      showError(pr.message);
      ember.flame.set(null);
    } else {
      ember.flame.set(pr);
      ember.lastDoc = pr;
    }
    chart(sr instanceof Error ? null : sr, r);
    if (sr instanceof Error && !(pr instanceof Error)) showError('totals: ' + sr.message);
    ember.runs++;
    afterData();
    if (!ember.timing.firstFlame && !(pr instanceof Error))
      ember.timing.firstFlame = performance.now();
    setBusy(false);
  }

  function setBusy(b) { document.body.dataset.state = b ? 'loading' : 'ready'; }

  function showError(msg) {
    ember.error = msg;
    $('error').hidden = !msg;
    $('error').textContent = msg || '';
  }

  /* ---- after data or a view change: zoom, search, table, panels ---------- */

  function afterData() {
    const s = ember.state, fg = ember.flame;
    fg.flame = s.o === 'flame';
    fg.zoom = fg.find(s.z);
    ember.table.set(fg);
    const sk = s.sort.replace(/^-/, '');
    ember.table.setSort(sk, s.sort.startsWith('-'));
    search(s.s);
    crumbs();
    head();
    downloads();
    panels();
  }

  function search(text) {
    const m = ember.flame.setSearch(text);
    ember.table.setSearch(ember.flame.search);
    const D = ember.flame.data;
    $('matched').textContent = m && D
      ? 'matched ' + m.count + ' frames, ' + A.value(m.value, D.unit) + ' (' + A.pct(m.value, m.of) + ')'
      : '';
    const hot = hottest();
    $('flame').dataset.hottest = hot || '';
    $('flame').dataset.nodes = D ? D.nodes : 0;
    $('flame').dataset.drawn = ember.flame.lastDraw.nodes;
  }

  /* The function of largest flat: what the tests look for. */
  function hottest() {
    const D = ember.flame.data, F = ember.flame.fns;
    if (!D) return null;
    let best = -1, bv = 0;
    for (let n = 0; n < D.names.length; n++)
      if (F.seen[n] && F.flat[n] > bv) { bv = F.flat[n]; best = n; }
    return best >= 0 ? D.names[best] : null;
  }

  /* The way back from a zoom: Reset, and each ancestor by name. */
  function crumbs() {
    const el = $('crumbs'), z = ember.state.z;
    el.textContent = '';
    if (!z.length) return;
    const b = document.createElement('button');
    b.type = 'button'; b.id = 'unzoom'; b.textContent = '⟲ Reset zoom';
    b.onclick = () => change({ z: [] });
    el.appendChild(b);
    z.forEach((name, k) => {
      if (k > 0) el.appendChild(document.createTextNode(' › '));
      const a = document.createElement('a');
      a.className = 'path'; a.textContent = name.length > 40 ? name.slice(0, 38) + '..' : name;
      a.title = name;
      a.onclick = () => change({ z: z.slice(0, k + 1) });
      el.appendChild(a);
    });
  }

  function head() {
    const D = ember.flame.data, el = $('flamehead');
    if (!D) { el.textContent = ''; return; }
    const st = D.sampleType || D.type || '';
    el.textContent = D.diff
      ? 'diff of ' + st + ': baseline ' + A.value(D.baseTotal, D.unit) + ', comparison ' +
        A.value(D.targetTotal, D.unit) + ' (' + A.change(D.baseTotal, D.targetTotal) +
        '); red grew, blue shrank (each function by its own flat change, as a share of its side)'
      : st + ': ' + A.value(D.total, D.unit) + ' total' +
        (D.whole !== D.total ? ' of ' + A.value(D.whole, D.unit) + ' selected' : '') +
        ', ' + D.nodes + ' frames; click to zoom, right-click for more';
  }

  function downloads() {
    const L = ember.last;
    for (const a of $('downloads').querySelectorAll('a')) {
      if (!L) { a.removeAttribute('href'); continue; }
      const p = new URLSearchParams(Object.assign({ query: L.query, format: a.dataset.f },
        L.from ? { from: L.from } : {}, L.to ? { to: L.to } : {}));
      a.href = '/api/v1/query?' + p;
      a.download = 'ember.' + (a.dataset.f === 'pprof' ? 'pb.gz' : a.dataset.f === 'svg' ? 'svg' : 'txt');
    }
  }

  /* ---- the chart of totals ---------------------------------------------- */

  function cssVar(n) { return getComputedStyle(document.body).getPropertyValue(n).trim(); }

  function seriesName(labels) {
    const ks = Object.keys(labels);
    return ks.length ? ks.map((k) => labels[k]).join(', ') : (ember.state.by ? '(none)' : 'total');
  }

  /* The series stacked: x the union of their times (s), each y the sum of
   * those below it, drawn largest first so that each fills down to the
   * next; RAW keeps the values for the legend. */
  function stack(doc) {
    const xs = new Set();
    for (const se of doc.series) for (const p of se.points) xs.add(p[0]);
    const x = [...xs].sort((a, b) => a - b), ix = new Map(x.map((t, i) => [t, i]));
    const raw = doc.series.map((se) => {
      const y = new Array(x.length).fill(0);
      for (const p of se.points) y[ix.get(p[0])] += p[1];
      return y;
    });
    const order = raw.map((y, i) => [y.reduce((a, b) => a + b, 0), i]).sort((a, b) => b[0] - a[0]).map((e) => e[1]);
    const cum = [], acc = new Array(x.length).fill(0);
    for (const i of order.slice().reverse()) {
      for (let k = 0; k < x.length; k++) acc[k] += raw[i][k];
      cum.push({ i, y: acc.slice() });
    }
    cum.reverse();                               // the top of the stack first
    return { x: x.map((t) => t / 1000), cum, raw };
  }

  function chart(doc, r) {
    const box = $('chart'), note = $('chartnote');
    ember.lastSeries = { doc, r };
    if (ember.chart) { ember.chart.destroy(); ember.chart = null; }
    box.textContent = '';
    if (!doc || !doc.series) { note.hidden = true; return; }
    if (!doc.series.length) {
      note.hidden = false;
      note.innerHTML = 'No profiles in this range. <a id="allTime">Show all time</a>';
      $('allTime').onclick = () => change({ from: '', to: '' });
      return;
    }
    note.hidden = true;
    const st = stack(doc), unit = doc.unit, fg = cssVar('--muted'), grid = cssVar('--line');
    const span = r.all || isNaN(r.from) || isNaN(r.to)
      ? [st.x[0], st.x[st.x.length - 1]] : [r.from / 1000, r.to / 1000];
    if (span[0] === span[1]) { span[0] -= 1; span[1] += 1; }
    chartRange = span;
    const series = [{}];
    for (const c of st.cum) {
      const col = COLORS[c.i % COLORS.length];
      series.push({
        label: seriesName(doc.series[c.i].labels), stroke: col, fill: col + '55', width: 1,
        points: { show: st.x.length < 60 },
        value: (u, v, si, idx) => idx == null ? '' : A.value(st.raw[c.i][idx], unit),
      });
    }
    const opts = {
      width: Math.max(300, box.clientWidth), height: 150, series,
      padding: [8, 8, 0, 0],
      scales: { x: { time: true, range: () => span } },
      axes: [{ stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
             { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 64,
               values: (u, vals) => vals.map((v) => A.value(v, unit)) }],
      cursor: { drag: { x: true, y: false, setScale: false } },
      legend: { live: true },
      hooks: { setSelect: [onSelect], draw: [drawBands] },
    };
    ember.chart = new uPlot(opts, [st.x, ...st.cum.map((c) => c.y)], box);
  }

  /* A drag on the chart: the new range, or in compare mode the baseline
   * or the comparison (which one, the radio says; then the other). */
  function onSelect(u) {
    if (u.select.width < 3) return;
    const a = Math.round(u.posToVal(u.select.left, 'x') * 1000);
    const b = Math.round(u.posToVal(u.select.left + u.select.width, 'x') * 1000);
    u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
    const s = ember.state;
    if (s.cmp === 'range') {
      const which = document.querySelector('input[name=drag]:checked').value;
      if (which === 'base') {
        document.querySelector('input[name=drag][value=cmp]').checked = true;
        change({ bfrom: String(a), bto: String(b), z: [] });
      } else {
        document.querySelector('input[name=drag][value=base]').checked = true;
        change({ cfrom: String(a), cto: String(b), z: [] });
      }
      return;
    }
    change({ from: String(a), to: String(b), z: [] });
  }

  /* Compare mode's two ranges as bands over the chart. */
  function drawBands(u) {
    const s = ember.state, now = ember.last ? ember.last.now : Date.now();
    if (s.cmp !== 'range') return;
    const ctx = u.ctx, bands = [[s.bfrom, s.bto, '--base'], [s.cfrom, s.cto, '--cmp']];
    ctx.save();
    for (const [f, t, v] of bands) {
      const a = A.time(f, now), b = A.time(t, now);
      if (isNaN(a) || isNaN(b)) continue;
      const x0 = u.valToPos(a / 1000, 'x', true), x1 = u.valToPos(b / 1000, 'x', true);
      ctx.fillStyle = cssVar(v) + '33';
      ctx.fillRect(x0, u.bbox.top, Math.max(2, x1 - x0), u.bbox.height);
      ctx.fillStyle = cssVar(v);
      ctx.fillRect(x0, u.bbox.top, Math.max(2, x1 - x0), 3 * devicePixelRatio);
    }
    ctx.restore();
  }

  /* ---- the flame graph's events ------------------------------------------ */

  function onFrameClick(n) {
    const z = n.d === 0 ? [] : ember.flame.path(n.d, n.i);
    change({ z });
  }

  function tip(n, e) {
    const el = $('tip'), D = ember.flame.data;
    if (!n) { el.hidden = true; return; }
    const V = (v) => A.value(v, D.unit), esc = (s) => s.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' }[c]));
    let h = '<b>' + esc(n.d === 0 ? 'total' : n.name) + '</b><br>';
    if (D.diff) {
      h += 'baseline ' + V(n.base) + ' (' + A.pct(n.base, D.baseTotal) + '), comparison ' +
        V(n.target) + ' (' + A.pct(n.target, D.targetTotal) + '): ' + A.change(n.base, n.target) +
        '<br>self: baseline ' + V(n.baseSelf) + ', comparison ' + V(n.targetSelf);
    } else {
      h += 'total ' + V(n.total) + ' (' + A.pct(n.total, D.whole) + '), self ' + V(n.self) +
        ' (' + A.pct(n.self, D.whole) + ')';
    }
    el.innerHTML = h;
    el.hidden = false;
    const x = Math.min(e.clientX + 14, innerWidth - el.offsetWidth - 8);
    const y = e.clientY + 16 + el.offsetHeight > innerHeight ? e.clientY - el.offsetHeight - 8 : e.clientY + 16;
    el.style.left = x + 'px'; el.style.top = y + 'px';
  }

  let menuName = null;
  function menu(name, x, y) {
    const m = $('menu');
    menuName = name;
    m.hidden = false;
    m.style.left = Math.min(x, innerWidth - m.offsetWidth - 6) + 'px';
    m.style.top = Math.min(y, innerHeight - m.offsetHeight - 6) + 'px';
  }

  function onMenu(e) {
    const li = e.target.closest('li');
    $('menu').hidden = true;
    if (!li || !menuName) return;
    const frame = menuName, name = fnName(frame, ember.state.g);
    const re = A.exactRe(name), q = ember.state.q.trim();
    switch (li.dataset.a) {
      case 'focus': case 'ignore': case 'hide': case 'show':
        change({ q: li.dataset.a + '(' + q + ', ' + re + ')', z: [] });
        break;
      case 'sandwich': change({ sw: name, src: '' }); break;
      case 'source': change({ src: name, sw: '' }); break;
      case 'search': change({ s: '^' + frame.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$' }, false); break;
      case 'copy': navigator.clipboard && navigator.clipboard.writeText(frame); break;
    }
  }

  /* ---- sandwich and source lines (the other views of issue 16) ----------- */

  /* Queries the views need (docs/query-language.md): callers(P, re) and
   * callees(P, re) give profiles, the callers' drawn inverted (the
   * function at the bottom, EmberFlame.invert); list(P, re) is pprof's
   * -list, its text as format=top. A server without them answers 400:
   * the sandwich is then computed here, the source lines are "not
   * available". */
  function viewQueries(q, name) {
    const re = A.exactRe(name);
    return {
      callers: 'callers(' + q + ', ' + re + ')',
      callees: 'callees(' + q + ', ' + re + ')',
      source: { query: 'list(' + q + ', ' + re + ')', format: 'top' },
    };
  }

  let panelKey = null;
  function panels() {
    const s = ember.state, key = JSON.stringify([s.sw, s.src, lastRunKey, s.o]);
    const dlg = $('panel');
    if (!s.sw && !s.src) { if (dlg.open) dlg.close(); panelKey = null; return; }
    if (key === panelKey && dlg.open) return;
    panelKey = key;
    if (!dlg.open) dlg.showModal();
    if (s.sw) sandwich(s.sw); else source(s.src);
  }

  function notAvailable(what, e) {
    return '<p class="na" data-na="1">' + what + ' are not available on this server' +
      (e.status === 400 ? '' : ' (' + e.status + ')') + ': ' + escapeHtml(e.message.split('\n')[0]) + '</p>';
  }

  function escapeHtml(s) { return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c])); }

  /* The sandwich: the server's callers() and callees() when it has them;
   * else, for a profile, the same computed here from the flame graph's
   * nodes (EmberFlame.sandwich), and said so. */
  async function sandwich(name) {
    const s = ember.state, L = ember.last, body = $('pbody'), D = ember.flame.data;
    $('ptitle').textContent = 'Callers and callees of ' + name;
    body.innerHTML = '<p id="swnote" class="na"></p>' +
      '<h3>Callers <small>(who calls it; it is at the bottom)</small></h3><div id="swcallers"></div>' +
      '<h3>Callees <small>(what it calls; it is on top)</small></h3><div id="swcallees"></div>';
    body.dataset.state = 'loading';
    const v = viewQueries(profileQuery(s, L ? L.now : Date.now()), name);
    const tp = {};
    if (L && L.from) tp.from = L.from;
    if (L && L.to) tp.to = L.to;
    const parts = [['callers', 'swcallers', true], ['callees', 'swcallees', false]];
    let got = await Promise.all(parts.map(([what]) =>
      A.query(v[what], Object.assign({ format: 'levels' }, tp)).then((doc) => ({ doc }), (e) => ({ e }))));
    let from = 'server';
    if (got.every((g) => g.e && g.e.status === 400) && D && !D.diff) {
      const sw = window.EmberFlame.sandwich(D, name);
      got = [{ doc: sw.callers }, { doc: sw.callees }];
      from = 'page';
      $('swnote').textContent = 'Computed in the page from the flame graph: this server ' +
        'has no callers() and callees() in its query language.';
    }
    if (from === 'server' && got[0].doc && got[0].doc.kind === 'profile')
      got[0] = { doc: window.EmberFlame.invert(got[0].doc) };
    ember.sandwich = { name, available: false, from, graphs: {} };
    parts.forEach(([what, id, flame], k) => {
      const el = $(id), g0 = got[k];
      if (g0.e) { el.innerHTML = notAvailable(what === 'callers' ? 'Callers' : 'Callees', g0.e); return; }
      el.innerHTML = '<div class="cv"><canvas></canvas></div>';
      const g = new window.EmberFlame.FlameGraph(el.querySelector('canvas'));
      g.flame = flame;
      g.set(g0.doc);
      g.onhover = tip;
      g.onclick = (n) => g.setZoom(n.d === 0 ? null : { d: n.d, i: n.i });
      g.draw();
      ember.sandwich.graphs[what] = g;
      ember.sandwich.available = true;
    });
    body.dataset.state = 'ready';
  }

  async function source(name) {
    const s = ember.state, L = ember.last, body = $('pbody');
    $('ptitle').textContent = 'Source lines of ' + name;
    body.dataset.state = 'loading';
    // list() is at granularity lines by itself
    const v = viewQueries(profileQuery(Object.assign({}, s, { g: '' }), L ? L.now : Date.now()), name).source;
    const p = Object.assign({ format: v.format }, L && L.from ? { from: L.from } : {}, L && L.to ? { to: L.to } : {});
    try {
      const text = await A.query(v.query, p);
      body.innerHTML = '<pre></pre>';
      body.querySelector('pre').textContent = typeof text === 'string' ? text : JSON.stringify(text, null, 1);
    } catch (e) {
      body.innerHTML = notAvailable('Source lines', e);
    }
    body.dataset.state = 'ready';
  }

  /* ---- completion of label names and values ------------------------------ */

  let comp = { items: [], at: 0, from: 0, to: 0 };

  async function labels() {
    if (!labelNames) labelNames = await A.get('/api/v1/labels').then((r) => r.data).catch(() => []);
    return labelNames;
  }

  async function values(name) {
    if (!valuesCache[name])
      valuesCache[name] = await A.get('/api/v1/label/' + encodeURIComponent(name) + '/values')
        .then((r) => r.data).catch(() => []);
    return valuesCache[name];
  }

  /* What the caret of INPUT is in: a label name, a value, or a word. */
  async function suggest(input) {
    const text = input.value, pos = input.selectionStart;
    const sel = A.selectors(text).find((s) => pos > s.start + s.type.length && pos <= s.end &&
                                             !(pos === s.end && text[s.end - 1] === '}'));
    let items = [], from = pos;
    if (sel) {
      const open = sel.start + sel.type.length + 1;
      const part = text.slice(open, pos), seg = part.slice(part.lastIndexOf(',') + 1);
      let m;
      if ((m = /^\s*([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"([^"]*)$/.exec(seg))) {
        const vs = await values(m[1]);
        from = pos - m[3].length;
        items = vs.filter((v) => v.startsWith(m[3])).map((v) => ({ label: v, text: v + '"' }));
      } else if ((m = /^\s*([A-Za-z_]\w*)?$/.exec(seg))) {
        const ls = await labels(), w = m[1] || '';
        from = pos - w.length;
        items = ls.filter((l) => l.startsWith(w)).map((l) => ({ label: l, text: l + '="' }));
      }
    } else {
      const m = /[A-Za-z_][\w:.]*$/.exec(text.slice(0, pos));
      if (m) {
        from = pos - m[0].length;
        items = FUNCS.filter((f) => f.startsWith(m[0]) && f !== m[0]).map((f) => ({ label: f + '()', text: f + '(' }))
          .concat(types.filter((t) => t.startsWith(m[0]) && t !== m[0]).map((t) => ({ label: t, text: t + '{' })));
      }
    }
    comp = { input, items: items.slice(0, 200), at: 0, from, to: pos };
    showComp();
  }

  function showComp() {
    const ul = $('complete');
    if (!comp.items.length || document.activeElement !== comp.input || comp.input !== $('q')) { ul.hidden = true; return; }
    ul.innerHTML = '';
    comp.items.forEach((it, k) => {
      const li = document.createElement('li');
      li.textContent = it.label;
      if (k === comp.at) li.className = 'on';
      li.onmousedown = (e) => { e.preventDefault(); comp.at = k; accept(); };
      ul.appendChild(li);
    });
    ul.hidden = false;
  }

  function accept() {
    const it = comp.items[comp.at], inp = comp.input;
    if (!it) return;
    inp.value = inp.value.slice(0, comp.from) + it.text + inp.value.slice(comp.to);
    const p = comp.from + it.text.length;
    inp.setSelectionRange(p, p);
    comp.items = [];
    showComp();
    suggest(inp);
  }

  function compKey(e) {
    const open = !$('complete').hidden && comp.items.length;
    if (!open) return;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      comp.at = (comp.at + (e.key === 'ArrowDown' ? 1 : comp.items.length - 1)) % comp.items.length;
      showComp();
      e.preventDefault();
    } else if (e.key === 'Tab') {                // Enter runs the query
      accept();
      e.preventDefault();
    } else if (e.key === 'Escape') {
      comp.items = []; showComp();
    }
  }

  /* ---- wiring -------------------------------------------------------------- */

  function wire() {
    const fg = ember.flame = new window.EmberFlame.FlameGraph($('flame'));
    const tt = ember.table = new window.EmberTable.TopTable($('table'));
    fg.onclick = onFrameClick;
    fg.onhover = tip;
    fg.onmenu = (n, x, y) => menu(n.name, x, y);
    tt.onmenu = menu;
    tt.onrow = (name) => {
      const s = '^' + name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
      change({ s: ember.state.s === s ? '' : s }, false);
    };
    tt.onsort = (k, desc) => commit(Object.assign({}, ember.state, { sort: (desc ? '-' : '') + k }), false);
    $('bar').onsubmit = (e) => {
      e.preventDefault();
      $('complete').hidden = true;
      change({ q: $('q').value, from: $('from').value.trim(), to: $('to').value.trim(),
               bq: $('bq').value, bfrom: $('bfrom').value.trim(), bto: $('bto').value.trim(),
               cfrom: $('cfrom').value.trim(), cto: $('cto').value.trim(), z: [] });
      lastRunKey = null;                 // Run reruns, even unchanged
      apply();
    };
    $('q').addEventListener('input', () => suggest($('q')));
    $('q').addEventListener('keydown', compKey);
    $('q').addEventListener('blur', () => setTimeout(() => {
      if (document.activeElement !== $('q')) $('complete').hidden = true;
    }, 150));
    $('type').onchange = () => change({ q: withType(ember.state.q, $('type').value), z: [] });
    $('preset').onchange = () => {
      const v = $('preset').value;
      if (v === 'all') change({ from: '', to: '', z: [] });
      else if (v) change({ from: 'now-' + v, to: 'now', z: [] });
    };
    for (const id of ['from', 'to', 'bfrom', 'bto', 'cfrom', 'cto'])
      $(id).onchange = () => $('bar').requestSubmit();
    $('by').onchange = () => change({ by: $('by').value });
    $('gran').onchange = () => change({ g: $('gran').value, z: [], sw: '', src: '' });
    $('cmp').onchange = () => compareToggle($('cmp').checked);
    $('cmpmode').onchange = () => compareToggle(true, $('cmpmode').value);
    $('bq').onchange = () => $('bar').requestSubmit();
    $('search').addEventListener('input', () => {
      commit(Object.assign({}, ember.state, { s: $('search').value }), false);
      search($('search').value);
    });
    for (const b of $('views').children) b.onclick = () => change({ v: b.dataset.v }, false);
    for (const b of $('orient').children) b.onclick = () => change({ o: b.dataset.o }, false);
    $('menu').onclick = onMenu;
    document.addEventListener('click', (e) => { if (!e.target.closest('#menu')) $('menu').hidden = true; });
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') $('menu').hidden = true;
    });
    $('pclose').onclick = () => $('panel').close();
    $('panel').addEventListener('close', () => {   // Esc, or the button
      if (ember.state.sw || ember.state.src) change({ sw: '', src: '' });
    });
    $('downloads').onclick = (e) => {
      const a = e.target.closest('a');
      if (!a || !a.href || !sessionStorage.getItem('ember.token')) return;
      e.preventDefault();
      A.download(a.href, a.download).catch((err) => showError(err.message));
    };
    window.addEventListener('popstate', () => { ember.state = readURL(); apply(); });
    let rt = null;
    window.addEventListener('resize', () => {
      clearTimeout(rt);
      rt = setTimeout(() => { fg.draw(); if (ember.chart) ember.chart.setSize({ width: $('chart').clientWidth, height: 150 }); }, 80);
    });
    new ResizeObserver(() => fg.draw()).observe($('flamebox'));
    new ResizeObserver(() => {           // a scrollbar came or went
      if (ember.chart && ember.chart.width !== $('chart').clientWidth)
        ember.chart.setSize({ width: $('chart').clientWidth, height: 150 });
    }).observe($('chartbox'));
    matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
      if (ember.lastSeries) chart(ember.lastSeries.doc, ember.lastSeries.r);
      fg.draw();
    });
  }

  /* Compare on: two ranges (halves of the current one to start with) or
   * two queries (the baseline starts as the bar's). */
  function compareToggle(on, mode) {
    const s = ember.state;
    if (!on) { change({ cmp: '', z: [] }); return; }
    mode = mode || 'range';
    const patch = { cmp: mode, z: [] };
    if (mode === 'range' && !(s.bfrom && s.cfrom)) {
      const now = Date.now(), r = range(s, now);
      let a = r.from, b = r.to;
      if (chartRange && (isNaN(a) || isNaN(b))) { a = chartRange[0] * 1000; b = chartRange[1] * 1000; }
      if (!isNaN(a) && !isNaN(b)) {
        const mid = Math.round((a + b) / 2);
        Object.assign(patch, { bfrom: String(Math.round(a)), bto: String(mid), cfrom: String(mid + 1), cto: String(Math.round(b)) });
      }
    }
    if (mode === 'query' && !s.bq) patch.bq = s.q;
    change(patch);
  }

  /* The profile types and label names for the bar; the default query is
   * the CPU type's (else the first) when the URL has none. */
  async function boot() {
    wire();
    ember.state = readURL();
    showControls(ember.state);
    try { types = (await A.get('/api/v1/types')).data; }
    catch (e) { showError(e.message); types = []; }
    for (const t of types) $('type').add(new Option(t, t));
    if (!ember.state.q && types.length) {
      const t = types.find((x) => x.split(':')[1] === 'cpu') || types[0];
      commit(Object.assign({}, ember.state, { q: t + '{}' }), false);
    }
    labels().then((ls) => { for (const l of ls) if (l !== ember.state.by) $('by').add(new Option(l, l)); setSelect($('by'), ember.state.by); });
    apply();
  }

  boot();
})();
