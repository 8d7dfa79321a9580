/*
 * web/flame.js: the flame graph of the page, drawn on a canvas from the
 * "levels" of /api/v1/query?format=levels (query/render_json.c).
 *
 * Levels come as one array per depth, four integers a node (x offset from
 * the end of the node before it, total, self, name index), seven for a
 * diff (the base side's three, the target side's three, the name). They are
 * turned once into typed arrays per level, with absolute x, so that a
 * redraw is a walk over flat arrays: a 100,000-node graph redraws in a few
 * milliseconds. A diff is laid out on base + target, so that what vanished
 * still has a width.
 *
 * Drawing groups rectangles by color (one fillStyle per color, not per
 * node) and fills each with fillRect, which Skia rasterizes directly (one
 * path of many rectangles per color looked cheaper in JavaScript but cost
 * a second to rasterize at 85,000 rectangles); past PIXELS_FROM of them
 * it writes their pixels into one ImageData instead. It skips what is
 * narrower than half a pixel, and writes labels
 * only where they fit, cut by the width of a monospace character measured
 * once. Zoom is a node: it and its descendants span the width, its
 * ancestors are drawn whole above it (click one to go back up). Search
 * greys out what does not match rather than removing it.
 */
'use strict';
(function () {
  const ROW = 18;                       // CSS pixels per level
  const PALETTE_N = 12;                 // warm colors by package
  const DIFF_N = 6;                     // shades each way for a diff
  const PIXELS_FROM = 4000;             // more rectangles: drawn as pixels

  /* The levels answer as typed arrays per level, parents and totals. */
  function parse(doc) {
    const diff = doc.kind === 'diff', k = diff ? 7 : 4, levels = [];
    let nodes = 0;
    for (const lv of doc.levels) {
      const n = lv.length / k;
      const L = {
        n, x: new Float64Array(n), w: new Float64Array(n),
        self: new Float64Array(n), name: new Int32Array(n),
        parent: new Int32Array(n),
      };
      if (diff) {
        L.bt = new Float64Array(n); L.bs = new Float64Array(n);
        L.tt = new Float64Array(n); L.ts = new Float64Array(n);
      }
      let endB = 0, endT = 0;
      for (let i = 0, o = 0; i < n; i++, o += k) {
        if (diff) {
          const xb = endB + lv[o], xt = endT + lv[o + 3];
          endB = xb + lv[o + 1]; endT = xt + lv[o + 4];
          L.bt[i] = lv[o + 1]; L.bs[i] = lv[o + 2];
          L.tt[i] = lv[o + 4]; L.ts[i] = lv[o + 5];
          L.x[i] = xb + xt; L.w[i] = lv[o + 1] + lv[o + 4];
          L.self[i] = lv[o + 2] + lv[o + 5]; L.name[i] = lv[o + 6];
        } else {
          const x = endT + lv[o];
          endT = x + lv[o + 1];
          L.x[i] = x; L.w[i] = lv[o + 1]; L.self[i] = lv[o + 2];
          L.name[i] = lv[o + 3];
        }
      }
      levels.push(L);
      nodes += n;
    }
    linkParents(levels);
    return {
      diff, levels, nodes, names: doc.names, unit: doc.unit,
      type: doc.type, sampleType: doc.sample_type,
      total: doc.total, whole: doc.whole || doc.total,
      baseTotal: doc.base_total || 0, targetTotal: doc.target_total || 0,
      width: levels.length ? levels[0].w[0] : 0,
    };
  }

  /* Each node's parent: the node of the level above whose span holds its
   * x. Both levels are sorted by x, so one merge-like pass per level. */
  function linkParents(levels) {
    for (let d = 1; d < levels.length; d++) {
      const P = levels[d - 1], L = levels[d];
      let p = 0;
      for (let i = 0; i < L.n; i++) {
        while (p < P.n - 1 && P.x[p] + P.w[p] <= L.x[i]) p++;
        L.parent[i] = p;
      }
    }
  }

  /* The functions' flat and cum (pprof's: a function counted once per
   * stack however often it recurses), summed over the nodes; for a diff
   * both sides'. */
  function functions(data) {
    const N = data.names.length, F = {
      flat: new Float64Array(N), cum: new Float64Array(N),
      bflat: new Float64Array(N), bcum: new Float64Array(N),
      seen: new Uint8Array(N),
    };
    const L = data.levels, first = firstKids(L), onPath = new Int32Array(N);
    const sd = [0], si = [0];           // depth first; -d: leaving (d, i)
    while (sd.length) {
      const d = sd.pop(), i = si.pop();
      if (d < 0) { onPath[L[-d].name[i]]--; continue; }
      if (d > 0) {
        const lv = L[d], nm = lv.name[i];
        F.seen[nm] = 1;
        F.flat[nm] += data.diff ? lv.ts[i] : lv.self[i];
        if (data.diff) F.bflat[nm] += lv.bs[i];
        if (onPath[nm]++ === 0) {       // no caller of the same name
          F.cum[nm] += data.diff ? lv.tt[i] : lv.w[i];
          if (data.diff) F.bcum[nm] += lv.bt[i];
        }
        sd.push(-d); si.push(i);
      }
      const nx = L[d + 1];
      if (nx)
        for (let c = first[d][i]; c >= 0 && c < nx.n && nx.parent[c] === i; c++) {
          sd.push(d + 1); si.push(c);
        }
    }
    return F;
  }

  /* Per level, each node's first child in the next level (-1: none): a
   * node's children are the run from there whose parent is that node. */
  function firstKids(L) {
    return L.map((lv, d) => {
      const first = new Int32Array(lv.n).fill(-1), nx = L[d + 1];
      if (nx) for (let c = nx.n - 1; c >= 0; c--) first[nx.parent[c]] = c;
      return first;
    });
  }

  /* Whether an ancestor of node I of level D has the name NM. */
  function recursive(L, d, i, nm) {
    for (let p = L[d].parent[i], e = d - 1; e >= 1; e--) {
      if (L[e].name[p] === nm) return true;
      p = L[e].parent[p];
    }
    return false;
  }

  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }

  /* The package of a function name: what colors it ("runtime",
   * "encoding/json", "main"). */
  function pkg(name) {
    const slash = name.lastIndexOf('/');
    const dot = name.indexOf('.', slash + 1);
    return dot > 0 ? name.slice(0, dot) : name;
  }

  function palette(dark) {
    const out = [];
    for (let i = 0; i < PALETTE_N; i++) {
      const h = 8 + (i * 37) % 52, s = 70 + (i * 13) % 25;
      const l = dark ? 38 + (i * 7) % 14 : 58 + (i * 7) % 16;
      out.push('hsl(' + h + ',' + s + '%,' + l + '%)');
    }
    return out;
  }

  /* Diff shades: 0..DIFF_N-1 blue (shrank, strongest first), DIFF_N
   * neutral, then red (grew, weakest first). */
  function diffPalette(dark) {
    const out = [];
    for (let i = DIFF_N; i >= 1; i--)
      out.push('hsl(215,' + (40 + i * 8) + '%,' + (dark ? 60 - i * 5 : 88 - i * 7) + '%)');
    out.push(dark ? 'hsl(0,0%,42%)' : 'hsl(0,0%,82%)');
    for (let i = 1; i <= DIFF_N; i++)
      out.push('hsl(2,' + (40 + i * 8) + '%,' + (dark ? 60 - i * 5 : 88 - i * 7) + '%)');
    return out;
  }

  class FlameGraph {
    constructor(canvas, opts) {
      this.canvas = canvas;
      this.ctx = canvas.getContext('2d', { alpha: false });
      this.opts = opts || {};
      this.data = null;
      this.zoom = null;                 // {d, i} or null
      this.search = null;               // RegExp or null
      this.flame = false;               // false: icicle (root on top)
      this.hover = null;
      this.lastDraw = { nodes: 0, ms: 0, labels: 0 };
      this.onclick = null;              // (node) => void
      this.onmenu = null;               // (node, clientX, clientY) => void
      this.onhover = null;              // (node|null, event) => void
      canvas.addEventListener('mousemove', (e) => this._move(e));
      canvas.addEventListener('mouseleave', () => this._leave());
      canvas.addEventListener('click', (e) => this._click(e));
      canvas.addEventListener('contextmenu', (e) => this._menu(e));
    }

    set(doc) {
      this.data = doc ? parse(doc) : null;
      this.fns = this.data ? functions(this.data) : null;
      this.zoom = null;
      this._colors();
    }

    /* Per name, its color index: by package, or for a diff by the
     * function's own (flat) change against its base share. */
    _colors() {
      const D = this.data;
      if (!D) return;
      const c = new Int32Array(D.names.length);
      for (let n = 0; n < D.names.length; n++) {
        if (!D.diff) {
          c[n] = hash(pkg(D.names[n])) % PALETTE_N;
          continue;
        }
        c[n] = diffShade(this.fns.bflat[n], this.fns.flat[n],
                         D.baseTotal, D.targetTotal);
      }
      this.colorOf = c;
    }

    node(d, i) {
      const L = this.data.levels[d];
      const o = { d, i, name: this.data.names[L.name[i]], total: L.w[i],
                  self: L.self[i], x: L.x[i] };
      if (this.data.diff) {
        o.base = L.bt[i]; o.baseSelf = L.bs[i];
        o.target = L.tt[i]; o.targetSelf = L.ts[i];
      }
      return o;
    }

    /* The names from the root's child to node (d, i): a zoom's address
     * that survives a reload. */
    path(d, i) {
      const out = [];
      for (let e = d, p = i; e >= 1; e--) {
        out.push(this.data.names[this.data.levels[e].name[p]]);
        p = this.data.levels[e].parent[p];
      }
      return out.reverse();
    }

    /* The node a path of names leads to, or null. */
    find(path) {
      if (!this.data || !path || !path.length) return null;
      let lo = 0, hi = this.data.width, found = null;
      for (let d = 1; d <= path.length && d < this.data.levels.length; d++) {
        const L = this.data.levels[d];
        found = null;
        for (let i = lowerBound(L, lo); i < L.n && L.x[i] < hi; i++)
          if (this.data.names[L.name[i]] === path[d - 1]) {
            found = { d, i };
            lo = L.x[i]; hi = L.x[i] + L.w[i];
            break;
          }
        if (!found) return null;
      }
      return found;
    }

    setZoom(z) { this.zoom = z; this.draw(); }

    setSearch(text) {
      this.search = null;
      if (text) {
        try { this.search = new RegExp(text); }
        catch (e) { this.search = new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')); }
      }
      this.draw();
      return this.matched();
    }

    /* What the search matches: the sum of the outermost matching nodes'
     * totals (a recursive match counted once), and the count. */
    matched() {
      const D = this.data;
      if (!D || !this.search) return null;
      const hit = this._hits();
      let sum = 0, count = 0;
      for (let d = 1; d < D.levels.length; d++) {
        const L = D.levels[d];
        for (let i = 0; i < L.n; i++) {
          if (!hit[L.name[i]]) continue;
          count++;
          let outer = true;
          for (let e = d - 1, p = L.parent[i]; e >= 1; e--) {
            if (hit[D.levels[e].name[p]]) { outer = false; break; }
            p = D.levels[e].parent[p];
          }
          if (outer) sum += D.diff ? L.tt[i] : L.w[i];
        }
      }
      return { value: sum, count, of: D.diff ? D.targetTotal : D.whole };
    }

    /* Per name, whether the search matches it; kept while the search and
     * the data are the same, so that a redraw tests no regex. */
    _hits() {
      const re = this.search, D = this.data;
      if (!re) return null;
      if (this._hit && this._hit.re === re && this._hit.D === D) return this._hit.v;
      const v = new Uint8Array(D.names.length);
      for (let n = 0; n < v.length; n++) v[n] = re.test(D.names[n]) ? 1 : 0;
      this._hit = { re, D, v };
      return v;
    }

    /* The visible span: the zoomed node's, else the whole. */
    _view() {
      const D = this.data;
      if (this.zoom) {
        const L = D.levels[this.zoom.d];
        return [L.x[this.zoom.i], L.x[this.zoom.i] + L.w[this.zoom.i], this.zoom.d];
      }
      return [0, D.width, 0];
    }

    _size() {
      const dpr = window.devicePixelRatio || 1;
      const w = Math.max(100, this.canvas.parentElement.clientWidth);
      const rows = this.data ? this.data.levels.length : 1;
      const h = Math.max(ROW * 2, rows * ROW + 2);
      if (this.canvas.width !== Math.round(w * dpr) ||
          this.canvas.height !== Math.round(h * dpr)) {
        this.canvas.width = Math.round(w * dpr);
        this.canvas.height = Math.round(h * dpr);
        this.canvas.style.width = w + 'px';
        this.canvas.style.height = h + 'px';
      }
      this.W = w; this.H = h; this.dpr = dpr;
    }

    _y(d) { return this.flame ? this.H - (d + 1) * ROW : d * ROW; }

    draw() {
      const t0 = performance.now();
      this._size();
      const ctx = this.ctx, css = getComputedStyle(this.canvas);
      const dark = css.getPropertyValue('--dark').trim() === '1';
      ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
      ctx.fillStyle = css.getPropertyValue('--bg').trim() || '#fff';
      ctx.fillRect(0, 0, this.W, this.H);
      if (!this.data || this.data.width <= 0) {
        this.lastDraw = { nodes: 0, ms: performance.now() - t0, labels: 0 };
        return;
      }
      const pal = this.data.diff ? diffPalette(dark) : palette(dark);
      const grey = dark ? '#3a3a3a' : '#e2e2e2';
      const buckets = new Map(), labels = [];
      const n = this._collect(buckets, labels, pal, grey);
      if (n > PIXELS_FROM) {
        this._pixels(buckets, css.getPropertyValue('--bg').trim() || '#fff');
      } else {
        for (const [color, rects] of buckets) {
          ctx.fillStyle = color;
          for (let k = 0; k < rects.length; k += 4)
            ctx.fillRect(rects[k], rects[k + 1], rects[k + 2], rects[k + 3]);
        }
      }
      this._labels(labels, css);
      this.lastDraw = { nodes: n, ms: performance.now() - t0, labels: labels.length / 4 };
    }

    /* Many rectangles written as pixels into one ImageData, put at once:
     * at 85,000 rectangles fillRect's per-call cost and Skia's raster are
     * most of a redraw, and a rectangle here is a few stores. Each keeps a
     * one-pixel gap on its right when it is 3 pixels wide or more. */
    _pixels(buckets, bg) {
      const Wd = this.canvas.width, Hd = this.canvas.height, dpr = this.dpr;
      if (!this._img || this._img.width !== Wd || this._img.height !== Hd) {
        this._img = new ImageData(Wd, Hd);
        this._px = new Uint32Array(this._img.data.buffer);
      }
      const px = this._px;
      px.fill(rgba(bg));
      for (const [color, r] of buckets) {
        const c = rgba(color);
        for (let k = 0; k < r.length; k += 4) {
          const x0 = Math.max(0, Math.round(r[k] * dpr));
          let x1 = Math.min(Wd, Math.round((r[k] + r[k + 2]) * dpr));
          if (x1 - x0 >= 3) x1--;
          else if (x1 <= x0) x1 = x0 + 1;
          const y0 = Math.round(r[k + 1] * dpr), y1 = Math.min(Hd, Math.round((r[k + 1] + r[k + 3]) * dpr));
          for (let y = y0; y < y1; y++) {
            const row = y * Wd;
            if (x1 - x0 > 16) px.fill(c, row + x0, row + x1);
            else for (let x = row + x0, e = row + x1; x < e; x++) px[x] = c;
          }
        }
      }
      this.ctx.putImageData(this._img, 0, 0);
    }

    /* Rectangles by color and labels to write; returns nodes drawn. */
    _collect(buckets, labels, pal, grey) {
      const D = this.data, [v0, v1, zd] = this._view(), W = this.W;
      const scale = W / (v1 - v0), hit = this._hits();
      let drawn = 0;
      const put = (color, x, y, w) => {
        let b = buckets.get(color);
        if (!b) buckets.set(color, b = []);
        b.push(x, y + 0.5, w, ROW - 1);
      };
      for (let d = 0; d < D.levels.length; d++) {
        const L = D.levels[d], y = this._y(d);
        for (let i = d < zd ? 0 : lowerBound(L, v0); i < L.n; i++) {
          const x0 = L.x[i], x1 = x0 + L.w[i];
          if (x0 >= v1 && L.w[i] > 0) break;
          if (x1 <= v0) continue;
          let px, pw;
          if (d < zd) {                 // an ancestor: the whole width
            if (x0 > v0 || x1 < v1) continue;
            px = 0; pw = W;
          } else {
            px = (x0 - v0) * scale; pw = L.w[i] * scale;
          }
          if (pw < 0.4) continue;
          drawn++;
          const nm = L.name[i];
          let color = d === 0 ? (D.diff ? pal[DIFF_N] : pal[0])
                              : pal[this.colorOf[nm]];
          if (hit && !hit[nm]) color = grey;
          if (d < zd) color = grey;
          put(color, px + 0.25, y, Math.max(pw - 0.5, 0.4));
          if (pw > 28) labels.push(i, d, px, pw);
        }
      }
      return drawn;
    }

    _labels(labels, css) {
      const ctx = this.ctx, D = this.data;
      ctx.font = '12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';
      ctx.textBaseline = 'middle';
      ctx.fillStyle = css.getPropertyValue('--frame-text').trim() || '#000';
      if (!this.charW) this.charW = ctx.measureText('MMMMMMMMMM').width / 10;
      for (let k = 0; k < labels.length; k += 4) {
        const i = labels[k], d = labels[k + 1], px = labels[k + 2], pw = labels[k + 3];
        const L = D.levels[d];
        let s = d === 0 ? 'total' : D.names[L.name[i]];
        const fit = Math.floor((pw - 6) / this.charW);
        if (fit < 3) continue;
        if (s.length > fit) s = s.slice(0, fit - 2) + '..';
        ctx.fillText(s, px + 3, this._y(d) + ROW / 2 + 0.5);
      }
    }

    /* The node under a point of the canvas (CSS pixels), or null. */
    at(px, py) {
      const D = this.data;
      if (!D) return null;
      const d = this.flame ? Math.floor((this.H - py) / ROW) : Math.floor(py / ROW);
      if (d < 0 || d >= D.levels.length) return null;
      const [v0, v1, zd] = this._view(), L = D.levels[d];
      if (d < zd) {                     // the ancestor on that row
        for (let i = 0; i < L.n; i++)
          if (L.x[i] <= v0 && L.x[i] + L.w[i] >= v1) return this.node(d, i);
        return null;
      }
      const v = v0 + (px / this.W) * (v1 - v0);
      let i = upperBound(L, v) - 1;
      if (i >= 0 && v < L.x[i] + L.w[i]) return this.node(d, i);
      return null;
    }

    /* Where the widest drawn node named NAME is, in CSS pixels of the
     * canvas (for the tests, which click it as a person would). */
    rectOf(name) {
      const D = this.data;
      if (!D) return null;
      const [v0, v1, zd] = this._view(), scale = this.W / (v1 - v0);
      let best = null;
      for (let d = Math.max(1, zd); d < D.levels.length; d++) {
        const L = D.levels[d];
        for (let i = lowerBound(L, v0); i < L.n && L.x[i] < v1; i++) {
          if (D.names[L.name[i]] !== name) continue;
          const w = L.w[i] * scale;
          if (!best || w > best.w)
            best = { x: (L.x[i] - v0) * scale, y: this._y(d), w, h: ROW, d, i };
        }
      }
      return best;
    }

    _pos(e) {
      const r = this.canvas.getBoundingClientRect();
      return [e.clientX - r.left, e.clientY - r.top];
    }
    _move(e) {
      const [x, y] = this._pos(e), n = this.at(x, y);
      this.hover = n;
      this.canvas.style.cursor = n ? 'pointer' : 'default';
      if (this.onhover) this.onhover(n, e);
    }
    _leave() { this.hover = null; if (this.onhover) this.onhover(null); }
    _click(e) {
      const [x, y] = this._pos(e), n = this.at(x, y);
      if (n && this.onclick) this.onclick(n, e);
    }
    _menu(e) {
      const [x, y] = this._pos(e), n = this.at(x, y);
      if (!n || n.d === 0 || !this.onmenu) return;
      e.preventDefault();
      this.onmenu(n, e.clientX, e.clientY);
    }
  }

  /* A diff shade from base and target flat, as shares of their totals (so
   * that a profile twice as long is not all red). */
  function diffShade(bflat, tflat, btot, ttot) {
    const b = btot > 0 ? bflat / btot : 0, t = ttot > 0 ? tflat / ttot : 0;
    const ch = t - b, rel = Math.abs(ch) / Math.max(b, t, 1e-12);
    if (Math.abs(ch) < 1e-9 || rel < 0.02) return DIFF_N;
    const step = Math.min(DIFF_N, 1 + Math.floor(rel * DIFF_N));
    return ch > 0 ? DIFF_N + step : DIFF_N - step;
  }

  /* ---- the sandwich, computed here when the server has no callers() --- */

  /* A levels document (format=levels' shape) of a tree of
   * {name, total, self, kids: Map}: children by name, x from the left. */
  function treeDoc(root, proto) {
    const names = ['total'], ix = new Map([['total', 0]]), levels = [];
    const stack = [[root, 0, 0]];
    while (stack.length) {
      const [n, d, x] = stack.pop();
      if (!ix.has(n.name)) { ix.set(n.name, names.length); names.push(n.name); }
      (levels[d] || (levels[d] = [])).push([x, n.total, n.self, d === 0 ? 0 : ix.get(n.name)]);
      let cx = x;
      const kids = [...n.kids.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const put = [];
      for (const k of kids) { put.push([k, d + 1, cx]); cx += k.total; }
      for (let k = put.length - 1; k >= 0; k--) stack.push(put[k]);
    }
    const out = levels.map((lv) => {
      lv.sort((a, b) => a[0] - b[0]);
      const flat = [];
      let end = 0;
      for (const [x, t, sf, nm] of lv) { flat.push(x - end, t, sf, nm); end = x + t; }
      return flat;
    });
    return { kind: 'profile', type: proto.type, unit: proto.unit,
             sample_type: proto.sampleType, total: root.total, whole: root.total,
             names, levels: out };
  }

  function trieAdd(node, name, total, self) {
    let k = node.kids.get(name);
    if (!k) node.kids.set(name, k = { name, total: 0, self: 0, kids: new Map() });
    k.total += total; k.self += self;
    return k;
  }

  /* Callers and callees of the function NAME from a profile's own nodes,
   * as pprof's -peek counts them: each outermost call of it (a recursion
   * counted once), its callees merged below it, its callers' paths
   * turned over above it. */
  function sandwich(data, name) {
    const L = data.levels, mk = () => ({ name: 'total', total: 0, self: 0, kids: new Map() });
    const up = mk(), down = mk();
    const kids = firstKids(L);
    const nm = data.names.indexOf(name);
    for (let d = 1; d < L.length; d++) {
      for (let i = 0; i < L[d].n; i++) {
        if (L[d].name[i] !== nm || recursive(L, d, i, nm)) continue;
        const w = L[d].w[i];
        up.total += w; down.total += w;
        let t = trieAdd(up, name, w, 0), p = L[d].parent[i];
        for (let e = d - 1; e >= 1; e--) {      // callers: it, then up
          t = trieAdd(t, data.names[L[e].name[p]], w, e === 1 ? w : 0);
          p = L[e].parent[p];
        }
        if (d === 1) t.self += w;
        copy(L, kids, d, i, trieAdd(down, name, w, L[d].self[i]), data.names);
      }
    }
    return { callers: treeDoc(up, data), callees: treeDoc(down, data) };
  }

  /* callers(P, re) as the server answers it, root first with the function
   * at the end of each path, turned leaf first: the function is the root
   * and its callers grow from it (only its nodes have self values). */
  function invert(doc) {
    const data = parse(doc), L = data.levels;
    const root = { name: 'total', total: 0, self: 0, kids: new Map() };
    for (let d = 1; d < L.length; d++) {
      for (let i = 0; i < L[d].n; i++) {
        const w = L[d].self[i];
        if (w === 0) continue;
        root.total += w;
        let t = root, p = i;
        for (let e = d; e >= 1; e--) {
          t = trieAdd(t, data.names[L[e].name[p]], w, e === 1 ? w : 0);
          p = L[e].parent[p];
        }
      }
    }
    return treeDoc(root, data);
  }

  /* Merges the subtree below node I of level D into trie node T. */
  function copy(L, kids, d, i, t, names) {
    const stack = [[d, i, t]];
    while (stack.length) {
      const [e, j, n] = stack.pop();
      if (e + 1 >= L.length) continue;
      for (let c = kids[e][j]; c >= 0 && c < L[e + 1].n && L[e + 1].parent[c] === j; c++)
        stack.push([e + 1, c, trieAdd(n, names[L[e + 1].name[c]], L[e + 1].w[c], L[e + 1].self[c])]);
    }
  }

  /* A CSS color of the page's ("#rrggbb", "hsl(h,s%,l%)") as the 32-bit
   * pixel of an ImageData on this (little-endian) machine: ABGR. */
  const rgbaCache = new Map();
  function rgba(color) {
    let v = rgbaCache.get(color);
    if (v !== undefined) return v;
    let r = 0, g = 0, b = 0, m;
    if ((m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color))) {
      r = parseInt(m[1], 16); g = parseInt(m[2], 16); b = parseInt(m[3], 16);
    } else if ((m = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/i.exec(color))) {
      r = 17 * parseInt(m[1], 16); g = 17 * parseInt(m[2], 16); b = 17 * parseInt(m[3], 16);
    } else if ((m = /^hsl\(([\d.]+),([\d.]+)%,([\d.]+)%\)$/.exec(color))) {
      const h = +m[1] / 360, s = +m[2] / 100, l = +m[3] / 100;
      const q = l < 0.5 ? l * (1 + s) : l + s - l * s, p = 2 * l - q;
      const f = (t) => {
        t = t < 0 ? t + 1 : t > 1 ? t - 1 : t;
        return t < 1 / 6 ? p + (q - p) * 6 * t : t < 1 / 2 ? q : t < 2 / 3 ? p + (q - p) * (2 / 3 - t) * 6 : p;
      };
      r = Math.round(255 * f(h + 1 / 3)); g = Math.round(255 * f(h)); b = Math.round(255 * f(h - 1 / 3));
    }
    v = ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
    rgbaCache.set(color, v);
    return v;
  }

  function lowerBound(L, v) {          // first node whose end is past v
    let lo = 0, hi = L.n;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (L.x[m] + L.w[m] <= v) lo = m + 1; else hi = m;
    }
    return lo;
  }
  function upperBound(L, v) {          // first node starting past v
    let lo = 0, hi = L.n;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (L.x[m] <= v) lo = m + 1; else hi = m;
    }
    return lo;
  }

  window.EmberFlame = { FlameGraph, parse, functions, diffShade, sandwich, invert, ROW };
})();
