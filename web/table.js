/*
 * web/table.js: the top table beside the flame graph: per function its
 * flat and cum, as pprof's -top, summed from the flame graph's own nodes
 * (EmberFlame.functions), so that table and graph always agree. A diff
 * shows the baseline's and the comparison's flat, the change of flat and
 * of cum. Headers sort (a second click turns the order); the search
 * highlights rows rather than hiding them;
 * at most ROWS rows are made, the rest counted.
 */
'use strict';
(function () {
  const ROWS = 1000;
  const A = () => window.EmberApi;

  const COLS = {
    profile: [
      ['name', 'Function'], ['flat', 'Flat'], ['flatp', 'Flat%'],
      ['cum', 'Cum'], ['cump', 'Cum%'],
    ],
    diff: [
      ['name', 'Function'], ['bflat', 'Base'], ['flat', 'Comparison'],
      ['dflat', 'Δ flat'], ['dflatp', 'Δ%'], ['dcum', 'Δ cum'],
    ],
  };

  class TopTable {
    constructor(el) {
      this.el = el;
      this.sort = 'flat';
      this.desc = true;
      this.search = null;
      this.onrow = null;                // (name) => void
      this.onmenu = null;               // (name, x, y) => void
      this.onsort = null;               // (key, desc) => void
      this.rows = [];
      el.addEventListener('click', (e) => this._click(e));
      el.addEventListener('contextmenu', (e) => this._menu(e));
    }

    /* The rows of the graph FG's functions. */
    set(fg) {
      const D = fg.data, F = fg.fns;
      this.diff = !!(D && D.diff);
      this.rows = [];
      if (!D) { this.render(); return; }
      this.unit = D.unit;
      this.whole = D.diff ? D.targetTotal : D.whole;
      this.baseTotal = D.baseTotal;
      for (let n = 0; n < D.names.length; n++) {
        if (!F.seen[n]) continue;
        const r = { name: D.names[n], flat: F.flat[n], cum: F.cum[n] };
        if (this.diff) {
          r.bflat = F.bflat[n]; r.bcum = F.bcum[n];
          r.dflat = r.flat - r.bflat; r.dcum = r.cum - r.bcum;
          r.dflatp = r.bflat ? r.dflat / Math.abs(r.bflat) : (r.flat ? Infinity : 0);
        }
        r.flatp = r.flat; r.cump = r.cum;
        this.rows.push(r);
      }
      this.render();
    }

    setSort(key, desc) { this.sort = key; this.desc = desc; this.render(); }

    setSearch(re) { this.search = re; this._highlight(); }

    _sorted() {
      const k = this.sort, sign = this.desc ? -1 : 1;
      const abs = /^d/.test(k);                 // changes sort by size
      return this.rows.slice().sort((a, b) => {
        if (k === 'name') return sign * (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
        const x = abs ? Math.abs(a[k]) : a[k], y = abs ? Math.abs(b[k]) : b[k];
        return x !== y ? sign * (x - y) : (a.name < b.name ? -1 : 1);
      });
    }

    render() {
      const cols = COLS[this.diff ? 'diff' : 'profile'];
      const rows = this._sorted(), u = this.unit, V = A().value;
      const cell = (r, k) => {
        switch (k) {
          case 'flatp': return A().pct(r.flat, this.whole);
          case 'cump': return A().pct(r.cum, this.whole);
          case 'dflatp': return A().change(r.bflat, r.flat);
          case 'dflat': case 'dcum': return (r[k] > 0 ? '+' : '') + V(r[k], u);
          default: return V(r[k], u);
        }
      };
      const esc = (s) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
      let h = '<table><thead><tr>';
      for (const [k, label] of cols) {
        const mark = k === this.sort ? (this.desc ? ' ▾' : ' ▴') : '';
        h += '<th data-k="' + k + '"' + (k === 'name' ? ' class="fn"' : '') + '>' + label + mark + '</th>';
      }
      h += '</tr></thead><tbody>';
      const n = Math.min(rows.length, ROWS);
      for (let i = 0; i < n; i++) {
        const r = rows[i];
        h += '<tr data-name="' + esc(r.name) + '">';
        for (const [k] of cols) {
          if (k === 'name') { h += '<td class="fn" title="' + esc(r.name) + '">' + esc(r.name) + '</td>'; continue; }
          let cls = '';
          if (this.diff && /^d/.test(k)) cls = r[k === 'dflatp' ? 'dflat' : k] > 0 ? ' class="up"' : r[k === 'dflatp' ? 'dflat' : k] < 0 ? ' class="down"' : '';
          h += '<td' + cls + '>' + cell(r, k) + '</td>';
        }
        h += '</tr>';
      }
      h += '</tbody></table>';
      if (rows.length > n) h += '<p class="more">' + (rows.length - n) + ' more functions; search or zoom to see them</p>';
      if (rows.length === 0) h += '<p class="more">No samples.</p>';
      this.el.innerHTML = h;
      this._highlight();
    }

    _highlight() {
      const re = this.search;
      for (const tr of this.el.querySelectorAll('tbody tr'))
        tr.classList.toggle('hl', !!re && re.test(tr.dataset.name));
    }

    _click(e) {
      const th = e.target.closest('th');
      if (th) {
        const k = th.dataset.k;
        this.desc = k === this.sort ? !this.desc : k !== 'name';
        this.sort = k;
        this.render();
        if (this.onsort) this.onsort(this.sort, this.desc);
        return;
      }
      const tr = e.target.closest('tbody tr');
      if (tr && this.onrow) this.onrow(tr.dataset.name);
    }

    _menu(e) {
      const tr = e.target.closest('tbody tr');
      if (!tr || !this.onmenu) return;
      e.preventDefault();
      this.onmenu(tr.dataset.name, e.clientX, e.clientY);
    }
  }

  window.EmberTable = { TopTable };
})();
