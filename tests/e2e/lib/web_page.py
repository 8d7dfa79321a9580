#!/usr/bin/env python3
"""tests/e2e/lib/web_page.py: the page of `ember serve` in headless Chromium,
used as a person would, through W3C WebDriver (svg_click.py's client):

  1. load /, pick "all time", type a query into the bar with completion
     of a label name and its values, run it: the flame graph draws the
     hottest function `ember query -o top` names (the canvas's
     data-hottest, and where the graph drew it);
  2. a real click on one of its frames zooms: the frame spans the width,
     the URL holds the zoom, "Reset zoom" is shown and undoes it, and the
     back button brings the zoom back;
  3. typing into the search box highlights frames and table rows, as many
     as the names that match;
  4. a right click opens the frame's menu; "Callers and callees" opens the
     sandwich: two flame graphs, or "not available" where the server has
     no callers()/callees() yet (said in the output);
  5. a drag over the totals chart selects a range; Compare splits it in two
     ranges and draws a diff with change columns;
  5b. the frame menu's "Source lines" shows list()'s text or says it is
     not available; the download links answer pprof, svg and collapsed of
     the page's query; the granularity select draws source lines; Compare
     also diffs two queries;
  6. the URL opened afresh gives the same view (query, zoom, search, what
     was drawn);
  7. a browser that prefers dark (emulated through chromedriver's CDP
     door) gets the dark theme, the canvas too.
The totals are stacked by a label (one band per value) before the first
screenshot.

usage: web_page.py URL --type TYPE --hottest NAME [--label L --value V]
         [--shots DIR] [--chromedriver PATH] [--chromium PATH]
Prints "ok: ..." and exits 0, or "FAIL: ..." and exits 1.
"""
import argparse
import base64
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg_click import Driver, Fail, start_chromedriver, free_port, ELEMENT  # noqa: E402

TAB, ENTER = "\ue004", "\ue007"


class Page:
    def __init__(self, d, shots):
        self.d = d
        self.shots = shots
        self.notes = []

    def js(self, script, *args):
        return self.d.js(script, *args)

    def js_async(self, script, *args):
        """SCRIPT calls its last argument with the answer."""
        return self.d.s("POST", "/execute/async",
                        {"script": script, "args": list(args)})

    def wait(self, cond, what, timeout=30):
        """Waits until the JS expression COND is truthy and the page is
        not loading."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.js("return document.body.dataset.state === 'ready' && "
                       "!!(%s);" % cond):
                return
            time.sleep(0.05)
        raise Fail("timed out waiting for %s; error on the page: %r; state "
                   "%s" % (what, self.js("return ember.error;"),
                           self.js("return location.search;")))

    def runs(self):
        return self.js("return ember.runs;")

    def wait_run(self, before, what):
        self.wait("ember.runs > %d" % before, what)
        err = self.js("return ember.error;")
        if err:
            raise Fail("%s: the page shows an error: %s" % (what, err))

    def shot(self, name):
        if not self.shots:
            return
        self.js("window.scrollTo(0, 0);")
        png = self.d.s("GET", "/screenshot")
        with open(os.path.join(self.shots, name + ".png"), "wb") as f:
            f.write(base64.b64decode(png))

    def type_into(self, css, text, clear=True):
        el = self.d.find(css)
        self.d.s("POST", "/element/%s/click" % el, {})
        if clear:
            self.d.s("POST", "/element/%s/clear" % el, {})
        self.d.s("POST", "/element/%s/value" % el, {"text": text})

    def pointer(self, css, dx, dy, actions):
        """Pointer actions at (dx, dy) from the top left of CSS's element,
        scrolled into view first; in viewport coordinates, since
        WebDriver's element offsets count from the center of the part of
        the element that is in view."""
        el = self.d.find(css)
        x, y = self.js("""var e = arguments[0], dx = arguments[1],
            dy = arguments[2], r = e.getBoundingClientRect();
          if (r.top + dy < 0 || r.top + dy > innerHeight - 4)
            window.scrollBy(0, r.top + dy - innerHeight / 2);
          r = e.getBoundingClientRect();
          return [Math.round(r.left + dx), Math.round(r.top + dy)];""",
                       {ELEMENT: el}, dx, dy)
        seq = [{"type": "pointerMove", "duration": 0, "origin": "viewport",
                "x": x, "y": y}] + actions(x, y)
        self.d.s("POST", "/actions", {"actions": [{
            "type": "pointer", "id": "mouse",
            "parameters": {"pointerType": "mouse"}, "actions": seq}]})
        self.d.s("DELETE", "/actions")

    def click_at(self, css, dx, dy, button=0):
        self.pointer(css, dx, dy, lambda x, y: [
            {"type": "pointerDown", "button": button},
            {"type": "pointerUp", "button": button}])

    def drag(self, css, x0, x1, y):
        self.pointer(css, x0, y, lambda x, yy: [
            {"type": "pointerDown", "button": 0},
            {"type": "pointerMove", "duration": 150, "origin": "viewport",
             "x": int(x + (x1 - x0)), "y": yy},
            {"type": "pointerUp", "button": 0}])


def view(p):
    """What the page shows: enough to tell two loads of a link apart."""
    return p.js("""return {q: ember.state.q, z: ember.state.z, s: ember.state.s,
        cmp: ember.state.cmp, query: ember.last && ember.last.query,
        nodes: ember.flame.data ? ember.flame.data.nodes : 0,
        diff: ember.flame.data ? ember.flame.data.diff : null,
        drawn: ember.flame.lastDraw.nodes,
        hottest: document.getElementById('flame').dataset.hottest,
        zoom: ember.flame.zoom ? ember.flame.path(ember.flame.zoom.d,
                                                  ember.flame.zoom.i) : null,
        matched: document.getElementById('matched').textContent};""")


def step_query(p, a):
    """1: all time, a typed query with completion, the hottest drawn."""
    p.js("var s = document.getElementById('preset'); s.value = 'all';"
         "s.dispatchEvent(new Event('change'));")
    p.wait("ember.state.from === '' && ember.state.to === ''", "all time")
    p.type_into("#q", a.type + "{")
    p.wait("!document.getElementById('complete').hidden", "label completion")
    items = p.js("return [...document.querySelectorAll('#complete li')]"
                 ".map(l => l.textContent);")
    if a.label not in items:
        raise Fail("completing a label after '{' offered %r, not %r"
                   % (items[:10], a.label))
    # type the label's first letters, take it with Tab, then its values
    p.type_into("#q", a.label[:2], clear=False)
    p.type_into("#q", TAB, clear=False)
    val = p.js("return document.getElementById('q').value;")
    if not val.endswith(a.label + '="'):
        raise Fail("Tab did not complete the label: the bar holds %r" % val)
    p.wait("document.querySelectorAll('#complete li').length > 0 && "
           "[...document.querySelectorAll('#complete li')].some(l => "
           "l.textContent === %s)" % json.dumps(a.value), "value completion")
    first = p.js("return document.querySelector('#complete li').textContent;")
    p.type_into("#q", TAB, clear=False)
    val = p.js("return document.getElementById('q').value;")
    if not val.endswith(a.label + '="' + first + '"'):
        raise Fail("Tab did not complete the value %r: %r" % (first, val))
    # the test's query: the whole type, every label
    before = p.runs()
    p.type_into("#q", a.type + "{}" + ENTER)
    p.wait_run(before, "the typed query")
    v = view(p)
    if v["query"] != a.type + "{}":
        raise Fail("the page ran %r, not the typed query" % v["query"])
    if v["hottest"] != a.hottest:
        raise Fail("the flame graph's hottest function is %r; ember query "
                   "-o top says %r" % (v["hottest"], a.hottest))
    r = p.js("return ember.flame.rectOf(arguments[0]);", a.hottest)
    if not r or r["w"] < 2:
        raise Fail("%r is not drawn (rect %r)" % (a.hottest, r))
    # the totals stacked by the label: one band per value
    before = p.runs()
    p.js("var s = document.getElementById('by'); s.value = arguments[0];"
         "s.dispatchEvent(new Event('change'));", a.label)
    p.wait_run(before, "the totals stacked by " + a.label)
    bands = p.js("return ember.chart ? ember.chart.series.slice(1)"
                 ".map(s => s.label) : [];")
    if a.value not in bands or len(bands) < 2:
        raise Fail("stacked by %s the chart has bands %r" % (a.label, bands))
    p.shot("page")
    return v, bands


def step_zoom(p, a):
    """2: a click zooms; Reset zoom and the back button."""
    name = p.js("""var D = ember.flame.data, best = null;
      for (var d = 2; d < D.levels.length; d++) { var L = D.levels[d];
        for (var i = 0; i < L.n; i++) { var w = L.w[i] / D.width;
          if (w < 0.9 && w > 0.05 && (!best || w > best.w))
            best = {w: w, name: D.names[L.name[i]]}; } }
      return best && best.name;""")
    if not name:
        raise Fail("no frame between 5% and 90% of the width to click")
    r = p.js("return ember.flame.rectOf(arguments[0]);", name)
    cw = p.js("return ember.flame.W;")
    p.click_at("#flame", r["x"] + r["w"] / 2, r["y"] + r["h"] / 2)
    p.wait("ember.state.z.length > 0", "a zoom after the click")
    z = p.js("return ember.state.z;")
    if z[-1] != name:
        raise Fail("clicked %r, zoomed to %r" % (name, z))
    r2 = p.js("return ember.flame.rectOf(arguments[0]);", name)
    if abs(r2["x"]) > 0.5 or abs(r2["w"] - cw) > 0.5:
        raise Fail("after the zoom %r is at x=%s width=%s, not the full "
                   "width %s" % (name, r2["x"], r2["w"], cw))
    if "z=" not in p.js("return location.search;"):
        raise Fail("the zoom is not in the URL")
    if not p.js("return !!document.getElementById('unzoom');"):
        raise Fail("no 'Reset zoom' after a zoom")
    p.shot("zoom")
    p.d.click("#unzoom")
    p.wait("ember.state.z.length === 0", "the reset")
    if abs(p.js("return ember.flame.rectOf(arguments[0]).w;", name) -
           r["w"]) > 0.5:
        raise Fail("Reset zoom did not restore %r's width" % name)
    p.js("history.back();")
    p.wait("ember.state.z.length > 0", "the back button's zoom")
    if p.js("return ember.state.z;") != z:
        raise Fail("back gave zoom %r, not %r" % (p.js(
            "return ember.state.z;"), z))
    return name, z


def step_search(p, term):
    """3: search highlights frames and rows."""
    p.type_into("#search", term)
    p.wait("document.getElementById('matched').textContent !== ''",
           "the search's count")
    got = p.js("return ember.flame.matched().count;")
    want = p.js("""var re = new RegExp(arguments[0]), D = ember.flame.data,
        n = 0; for (var d = 1; d < D.levels.length; d++) {
        var L = D.levels[d]; for (var i = 0; i < L.n; i++)
          if (re.test(D.names[L.name[i]])) n++; } return n;""", term)
    rows = p.js("return document.querySelectorAll('#table tr.hl').length;")
    names = p.js("""var re = new RegExp(arguments[0]);
        return [...document.querySelectorAll('#table tbody tr')]
          .filter(t => re.test(t.dataset.name)).length;""", term)
    if want == 0:
        raise Fail("search %r matches nothing: pick another term" % term)
    if got != want or rows != names or rows == 0:
        raise Fail("search %r: %d frames highlighted of %d that match, %d "
                   "rows of %d" % (term, got, want, rows, names))
    if ("s=" + term[:3]) not in p.js("return decodeURIComponent("
                                     "location.search);"):
        raise Fail("the search is not in the URL")
    return got, rows


def step_sandwich(p, name):
    """4: the frame menu and the sandwich."""
    r = p.js("return ember.flame.rectOf(arguments[0]);", name)
    if not r:
        raise Fail("%r is not drawn for the right click" % name)
    p.click_at("#flame", r["x"] + min(r["w"] / 2, 20), r["y"] + r["h"] / 2,
               button=2)
    p.wait("!document.getElementById('menu').hidden", "the frame's menu")
    p.d.click("#menu li[data-a=sandwich]")
    p.wait("document.getElementById('panel').open && "
           "document.getElementById('pbody').dataset.state === 'ready' && "
           "ember.sandwich && ember.sandwich.name === %s" % json.dumps(name),
           "the sandwich")
    if "sw=" not in p.js("return location.search;"):
        raise Fail("the sandwich is not in the URL")
    sw = p.js("""var w = ember.sandwich, out = {from: w.from,
        available: w.available, graphs: {}};
      for (var k in w.graphs) { var g = w.graphs[k], D = g.data;
        out.graphs[k] = {drawn: g.lastDraw.nodes, total: D.total,
          first: D.levels.length > 1 ? D.names[D.levels[1].name[0]] : null,
          n1: D.levels.length > 1 ? D.levels[1].n : 0}; }
      var F = ember.flame.fns, i = ember.flame.data.names.indexOf(w.name);
      out.cum = F.cum[i];
      return out;""")
    if sw["available"]:
        for k, g in sw["graphs"].items():
            if g["drawn"] < 2 or g["first"] != name or g["n1"] != 1:
                raise Fail("the sandwich's %s graph: %r" % (k, g))
            if sw["from"] == "page" and g["total"] != sw["cum"]:
                raise Fail("the sandwich's %s total %s is not %r's cum %s"
                           % (k, g["total"], name, sw["cum"]))
        what = "sandwich drawn from the %s (%s)" % (
            "server's callers()/callees()" if sw["from"] == "server"
            else "page's own nodes: the server has no callers()/callees()",
            ", ".join("%s %d nodes" % (k, g["drawn"])
                      for k, g in sorted(sw["graphs"].items())))
    else:
        na = p.js("return document.querySelectorAll('#pbody [data-na]')"
                  ".length;")
        if na != 2:
            raise Fail("the sandwich is neither drawn nor said to be "
                       "unavailable")
        what = "sandwich not available on this server, said so"
    p.shot("sandwich")
    p.d.click("#pclose")
    p.wait("!document.getElementById('panel').open", "the panel's close")
    return what


def step_source(p, name):
    """The source lines of a function from its menu: list()'s text, or
    "not available" where the server has no list()."""
    r = p.js("return ember.flame.rectOf(arguments[0]);", name)
    p.click_at("#flame", r["x"] + min(r["w"] / 2, 20), r["y"] + r["h"] / 2,
               button=2)
    p.wait("!document.getElementById('menu').hidden", "the frame's menu")
    p.d.click("#menu li[data-a=source]")
    p.wait("document.getElementById('panel').open && "
           "document.getElementById('pbody').dataset.state === 'ready' && "
           "document.getElementById('ptitle').textContent.indexOf("
           "'Source lines') === 0", "the source lines")
    text = p.js("var pre = document.querySelector('#pbody pre');"
                "return pre ? pre.textContent : null;")
    na = p.js("return document.querySelectorAll('#pbody [data-na]')"
              ".length;")
    p.d.click("#pclose")
    p.wait("!document.getElementById('panel').open", "the panel's close")
    if text:
        if name not in text:
            raise Fail("the source lines do not name %r: %r" % (name,
                                                                text[:200]))
        return "source lines shown (%d lines)" % len(text.splitlines())
    if na != 1:
        raise Fail("the source panel shows neither lines nor 'not "
                   "available'")
    return "source lines not available on this server, said so"


def step_downloads(p):
    """The download links answer what they say, as the page's query."""
    got = p.js_async("""var out = [], done = arguments[arguments.length - 1];
      var as = document.querySelectorAll('#downloads a');
      Promise.all([...as].map(a => fetch(a.href).then(r => r.arrayBuffer()
        .then(b => out.push([a.dataset.f, r.status,
                             r.headers.get('Content-Type'), b.byteLength,
                             new URL(a.href).searchParams.get('query')])))))
        .then(() => done(out));""")
    query = p.js("return ember.last.query;")
    for f, status, ctype, size, q in got:
        want = {"pprof": "application/octet-stream", "svg": "image/svg+xml",
                "collapsed": "text/plain"}[f]
        if status != 200 or not ctype.startswith(want) or size < 100 or \
                q != query:
            raise Fail("download %s: %s %s, %d bytes, query %r (the page's "
                       "is %r)" % (f, status, ctype, size, q, query))
    return len(got)


def step_granularity(p):
    """Frames as source lines (granularity()), then as functions again."""
    def pick(g):
        before = p.runs()
        p.js("var s = document.getElementById('gran'); s.value = "
             "arguments[0]; s.dispatchEvent(new Event('change'));", g)
        p.wait_run(before, "granularity %r" % g)
    pick("lines")
    q = p.js("return ember.last.query;")
    lines = p.js("return ember.flame.data.names.filter(n => "
                 "/ \\S+:\\d+$/.test(n)).length;")
    if not q.startswith("granularity(") or lines < 2:
        raise Fail("granularity lines ran %r and drew %d line frames" %
                   (q, lines))
    pick("")
    return lines


def step_compare(p):
    """5: a drag selects a range; Compare draws a diff of two ranges."""
    # the change search and sandwich made are not wanted here
    p.js("document.getElementById('search').value = '';"
         "document.getElementById('search').dispatchEvent("
         "new Event('input'));")
    box = p.js("var r = document.querySelector('#chart .u-over')"
               ".getBoundingClientRect(); return [r.width, r.height];")
    before = p.runs()
    p.drag("#chart .u-over", box[0] * 0.05, box[0] * 0.95, box[1] / 2)
    p.wait_run(before, "the range a drag selected")
    s = p.js("return ember.state;")
    if not (s["from"].isdigit() and s["to"].isdigit() and
            int(s["from"]) < int(s["to"])):
        raise Fail("the drag set from=%r to=%r" % (s["from"], s["to"]))
    before = p.runs()
    p.d.click("#cmp")
    p.wait_run(before, "the comparison")
    v = view(p)
    if not v["diff"] or not v["query"].startswith("diff("):
        raise Fail("Compare ran %r, not a diff" % v["query"])
    cols = p.js("return [...document.querySelectorAll('#table th')]"
                ".map(t => t.textContent);")
    if not any(c.startswith("Δ") for c in cols):
        raise Fail("the diff's table has no change column: %r" % cols)
    if p.js("return ember.flame.lastDraw.nodes;") < 2:
        raise Fail("the diff drew nothing")
    p.shot("compare")
    # two queries: the baseline typed under the bar, over the same range
    before = p.runs()
    p.js("var s = document.getElementById('cmpmode'); s.value = 'query';"
         "s.dispatchEvent(new Event('change'));")
    p.wait_run(before, "compare mode 'two queries'")
    base = p.js("return ember.state.q;").replace("{}", '{worker="hash"}')
    before = p.runs()
    p.type_into("#bq", base + ENTER)
    p.wait_run(before, "the baseline query")
    q2 = p.js("return ember.last.query;")
    if q2 != "diff(%s, %s)" % (base, p.js("return ember.state.q;")) or \
            not p.js("return ember.flame.data.diff;"):
        raise Fail("comparing two queries ran %r" % q2)
    return v


def step_link(p, url_before, v_before):
    """6: the URL opened afresh gives the same view."""
    p.d.s("POST", "/url", {"url": url_before})
    p.wait("ember.runs >= 1", "the shared link's load")
    v = view(p)
    for k in ("q", "z", "s", "cmp", "query", "nodes", "diff", "drawn",
              "hottest", "zoom", "matched"):
        if v[k] != v_before[k]:
            raise Fail("the shared link's %s is %r, was %r" %
                       (k, v[k], v_before[k]))
    return v


def step_dark(p):
    """7: a browser that prefers dark gets the dark theme, canvas too."""
    p.d.s("POST", "/goog/cdp/execute", {
        "cmd": "Emulation.setEmulatedMedia",
        "params": {"features": [{"name": "prefers-color-scheme",
                                 "value": "dark"}]}})
    p.js("ember.flame.draw();")
    dark = p.js("return [getComputedStyle(document.body).getPropertyValue("
                "'--dark').trim(), getComputedStyle(document.body)"
                ".backgroundColor, Array.from(ember.flame.ctx.getImageData("
                "1, ember.flame.H * ember.flame.dpr - 2, 1, 1).data)];")
    if dark[0] != "1" or sum(dark[2][:3]) > 3 * 80:
        raise Fail("prefers-color-scheme: dark gave --dark=%r, body %r, "
                   "canvas background %r" % tuple(dark))
    p.shot("dark")


def run(a):
    proc, d = start_chromedriver(a.chromedriver, free_port())
    try:
        d.session(a.chromium)
        p = Page(d, a.shots)
        d.s("POST", "/url", {"url": a.url})
        p.wait("window.ember && ember.flame && document.getElementById("
               "'type').options.length > 0", "the page's start")
        v, bands = step_query(p, a)
        name, z = step_zoom(p, a)
        hits, rows = step_search(p, a.search)
        shared = view(p)
        url = p.js("return location.href;")
        sw = step_sandwich(p, a.hottest)
        src = step_source(p, a.hottest)
        ndl = step_downloads(p)
        nlines = step_granularity(p)
        diff = step_compare(p)
        step_link(p, url, shared)
        step_dark(p)
        print("ok: %s drawn first (%d frames, %d nodes); stacked by %s: "
              "%d bands; clicked %r: zoomed "
              "%s, reset and back work; search %r: %d frames, %d rows; %s; "
              "%s; %d downloads answer; %d line frames at granularity lines; "
              "compare: %s drew %d nodes, and two "
              "queries; the shared link gave the same view; dark theme "
              "followed the browser"
              % (a.hottest, v["drawn"], v["nodes"], a.label, len(bands),
                 name, " > ".join(z),
                 a.search, hits, rows, sw, src, ndl, nlines,
                 diff["query"][:60] + "...",
                 diff["drawn"]))
    finally:
        d.quit()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except Exception:
            proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--type", required=True)
    ap.add_argument("--hottest", required=True)
    ap.add_argument("--label", default="worker")
    ap.add_argument("--value", default="sort")
    ap.add_argument("--search", default="sort\\.")
    ap.add_argument("--shots")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    a = ap.parse_args()
    try:
        run(a)
    except Fail as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)
    except (OSError, KeyError, ValueError, TypeError) as e:
        print("FAIL: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
