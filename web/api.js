/*
 * web/api.js: what the page knows of the server and of the query
 * language: requests to /api/v1 (with the bearer token when the server
 * wants one), times and durations as `ember query` reads them, the
 * selectors inside a query's text, regexes quoted for the language, and
 * values in their units as pprof prints them.
 */
'use strict';
(function () {
  const TOKEN_KEY = 'ember.token';

  /* An error answer of the API: its status and the server's message. */
  class ApiError extends Error {
    constructor(status, msg) { super(msg); this.status = status; }
  }

  function headers() {
    const t = sessionStorage.getItem(TOKEN_KEY);
    return t ? { Authorization: 'Bearer ' + t } : {};
  }

  /* GET PATH?PARAMS; JSON or text by the answer's type. A 401 asks for the
   * token once and tries again. */
  async function get(path, params, signal) {
    const url = path + (params ? '?' + new URLSearchParams(params) : '');
    let r = await fetch(url, { headers: headers(), signal });
    if (r.status === 401 && askToken())
      r = await fetch(url, { headers: headers(), signal });
    const ct = r.headers.get('Content-Type') || '';
    const body = ct.startsWith('application/json') ? await r.json() : await r.text();
    if (!r.ok)
      throw new ApiError(r.status, body && body.error ? body.error : String(body));
    return body;
  }

  function askToken() {
    const t = window.prompt('This server wants a bearer token (ember serve --token-file):');
    if (!t) return false;
    sessionStorage.setItem(TOKEN_KEY, t.trim());
    return true;
  }

  function query(q, extra, signal) {
    return get('/api/v1/query', Object.assign({ query: q }, extra), signal);
  }

  /* A download: a plain link, or with a token a fetch saved as a blob. */
  async function download(href, name) {
    if (!sessionStorage.getItem(TOKEN_KEY)) { location.href = href; return; }
    const r = await fetch(href, { headers: headers() });
    if (!r.ok) throw new ApiError(r.status, await r.text());
    const a = document.createElement('a');
    a.href = URL.createObjectURL(await r.blob());
    a.download = name;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 5000);
  }

  /* ---- times ---------------------------------------------------------- */

  const UNITS = { y: 365 * 86400e3, w: 7 * 86400e3, d: 86400e3, h: 3600e3,
                  m: 60e3, s: 1e3, ms: 1 };

  /* "1h30m" -> ms; NaN when it is no duration. */
  function duration(s) {
    const re = /(\d+)(ms|y|w|d|h|m|s)/gy;
    let ms = 0, m, end = 0;
    if (!s) return NaN;
    while ((m = re.exec(s)) !== null) { ms += Number(m[1]) * UNITS[m[2]]; end = re.lastIndex; }
    return end === s.length && end > 0 ? ms : NaN;
  }

  function durationText(ms) {
    for (const u of ['d', 'h', 'm', 's'])
      if (ms >= UNITS[u] && ms % UNITS[u] === 0) return ms / UNITS[u] + u;
    return Math.round(ms) + 'ms';
  }

  /* A time as the server reads it (docs/query-language.md 6.5) -> unix ms,
   * NOW given; NaN when it is none. '' is NaN too (all time). */
  function time(s, now) {
    s = String(s || '').trim();
    if (s === '') return NaN;
    if (s === 'now') return now;
    let m = /^(?:now)?([+-])(.+)$/.exec(s);
    if (m && !/^\d{4}-/.test(s)) {
      const d = duration(m[2]);
      return isNaN(d) ? NaN : now + (m[1] === '-' ? -d : d);
    }
    if (/^\d+(\.\d+)?$/.test(s)) {
      const int = s.split('.')[0];
      return int.length >= 12 ? Number(s) : Math.round(Number(s) * 1000);
    }
    const t = Date.parse(s.replace(' ', 'T'));
    return isNaN(t) ? NaN : t;
  }

  function iso(ms) { return new Date(ms).toISOString().replace('.000Z', 'Z'); }

  /* A step that gives about N points over SPAN ms. */
  function step(span, n) {
    const steps = [100, 200, 500, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3,
      120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3, 7200e3, 10800e3, 21600e3,
      43200e3, 86400e3, 7 * 86400e3];
    const want = span / (n || 200);
    for (const s of steps) if (s >= want) return s;
    return steps[steps.length - 1];
  }

  /* ---- the query's text --------------------------------------------------- */

  /* The selectors of a query: [{start, end, type, body}] for each
   * `TYPE{...}` or `{...}` outside strings and comments. */
  function selectors(text) {
    const out = [];
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === '"' || c === "'" || c === '`') { i = skipString(text, i); continue; }
      if (c === '#') { while (i < text.length && text[i] !== '\n') i++; continue; }
      if (c === '{') {
        let j = i, k = i;
        while (j > 0 && /[\w:.]/.test(text[j - 1])) j--;
        k = i + 1;
        while (k < text.length && text[k] !== '}') {
          if (text[k] === '"' || text[k] === "'" || text[k] === '`') k = skipString(text, k);
          else k++;
        }
        out.push({ start: j, end: Math.min(k + 1, text.length),
                   type: text.slice(j, i), body: text.slice(i + 1, k) });
        i = k + 1;
        continue;
      }
      i++;
    }
    return out;
  }

  function skipString(text, i) {
    const q = text[i];
    for (i++; i < text.length; i++) {
      if (text[i] === '\\' && q !== '`') { i++; continue; }
      if (text[i] === q) return i + 1;
    }
    return i;
  }

  /* The first selector's text, or the whole query when it has none (a bare
   * type name). */
  function firstSelector(text) {
    const s = selectors(text)[0];
    return s ? text.slice(s.start, s.end) : text.trim();
  }

  /* TEXT with every selector given the range [FROM, TO] (ms) of its own:
   * `SEL[Dms] @ T`, so that one query can hold two ranges (a diff). */
  function withRange(text, from, to) {
    const sels = selectors(text);
    if (sels.length === 0) return text.trim() + '[' + (to - from) + 'ms] @ ' + (to / 1000);
    let out = '', at = 0;
    for (const s of sels) {
      out += text.slice(at, s.end) + '[' + Math.max(1, to - from) + 'ms] @ ' + (to / 1000);
      at = s.end;
    }
    return out + text.slice(at);
  }

  /* A regex matching exactly NAME, as a string of the language: a raw
   * `...` string when it holds no backquote. */
  function exactRe(name) {
    const re = '^' + name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
    return re.indexOf('`') < 0 ? '`' + re + '`' : JSON.stringify(re);
  }

  /* ---- values ---------------------------------------------------------- */

  function trim(v) {
    const a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1).replace(/\.0$/, '')
      : v.toFixed(2).replace(/\.?0+$/, '');
  }

  /* V in UNIT as people read it: "1.20s", "350ms", "1.5MB", "12k". */
  function value(v, unit) {
    const a = Math.abs(v);
    if (unit === 'nanoseconds') {
      if (a >= 3600e9) return trim(v / 3600e9) + 'h';
      if (a >= 60e9) return trim(v / 60e9) + 'min';
      if (a >= 1e9) return trim(v / 1e9) + 's';
      if (a >= 1e6) return trim(v / 1e6) + 'ms';
      if (a >= 1e3) return trim(v / 1e3) + 'µs';
      return trim(v) + 'ns';
    }
    if (unit === 'bytes') {
      const u = ['B', 'kB', 'MB', 'GB', 'TB'];
      let k = 0, x = v;
      while (Math.abs(x) >= 1024 && k < u.length - 1) { x /= 1024; k++; }
      return trim(x) + u[k];
    }
    if (a >= 1e9) return trim(v / 1e9) + 'G';
    if (a >= 1e6) return trim(v / 1e6) + 'M';
    if (a >= 1e4) return trim(v / 1e3) + 'k';
    return trim(v);
  }

  function pct(v, of) {
    if (!of) return '';
    const p = 100 * v / of;
    return (Math.abs(p) >= 10 ? p.toFixed(1) : p.toFixed(2)) + '%';
  }

  /* The change from B to T as "+25.0%", "-100%", "new". */
  function change(b, t) {
    if (b === 0) return t === 0 ? '0%' : 'new';
    const p = 100 * (t - b) / Math.abs(b);
    return (p > 0 ? '+' : '') + (Math.abs(p) >= 10 ? p.toFixed(0) : p.toFixed(1)) + '%';
  }

  window.EmberApi = { ApiError, get, query, download, duration, durationText,
    time, iso, step, selectors, firstSelector, withRange, exactRe, value, pct,
    change };
})();
