#!/usr/bin/env python3
"""bench/web_bench.py: the page's times in headless Chromium (issue 16),
through W3C WebDriver (tests/e2e/lib/svg_click.py's client).

  first  URL loaded afresh ROUNDS times: ember.timing.firstFlame, the
         milliseconds from navigation start (performance.timeOrigin) to the
         end of the first flame graph's draw: page, scripts, the levels and
         totals requests, parsing and drawing, all in.
  redraw on the page at each BIG URL (a graph of many nodes): its first
         draw from navigation start, then ember.flame.draw() REDRAWS
         times: whole, zoomed into the widest child of the root, and with
         a search highlighting part of it; each draw timed as the script
         runs it, and again once the canvas is rasterized (a one-pixel
         getImageData, which waits for Skia to fill what was drawn).

usage: web_bench.py URL BIG... [--rounds N] [--redraws N]
Prints one JSON object.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "e2e", "lib"))
from svg_click import start_chromedriver, free_port  # noqa: E402


def ready(d, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if d.js("return !!(window.ember && ember.timing.firstFlame && "
                "document.body.dataset.state === 'ready');"):
            return
        time.sleep(0.02)
    raise SystemExit("web_bench: the page did not draw: %r" %
                     d.js("return window.ember && ember.error;"))


REDRAW_JS = """
var fg = ember.flame, n = arguments[0], out = {};
function time(setup) {
  setup(); fg.draw();
  var t = [], r = [];
  for (var k = 0; k < n; k++) {
    var t0 = performance.now(); fg.draw(); var t1 = performance.now();
    fg.ctx.getImageData(0, 0, 1, 1);    // waits for the raster too
    t.push(t1 - t0); r.push(performance.now() - t0);
  }
  t.sort(function (a, b) { return a - b; });
  r.sort(function (a, b) { return a - b; });
  return {median: t[t.length >> 1], max: t[t.length - 1],
          raster_median: r[r.length >> 1], raster_max: r[r.length - 1],
          drawn: fg.lastDraw.nodes};
}
out.whole = time(function () { fg.zoom = null; fg.search = null; });
var L = fg.data.levels[1], best = 0;
for (var i = 1; i < L.n; i++) if (L.w[i] > L.w[best]) best = i;
out.zoomed = time(function () { fg.zoom = {d: 1, i: best}; });
out.search = time(function () { fg.zoom = null;
                                fg.search = new RegExp('a1|f2'); });
fg.search = null; fg.zoom = null;
var t0 = performance.now(); fg.set(ember.lastDoc); var t1 = performance.now();
out.parse_ms = t1 - t0;
out.nodes = fg.data.nodes;
out.canvas = [fg.W, fg.H];
return out;
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("big", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--redraws", type=int, default=30)
    a = ap.parse_args()
    proc, d = start_chromedriver("/usr/bin/chromedriver", free_port())
    out = {}
    try:
        d.session("/usr/bin/chromium")
        first = []
        for _ in range(a.rounds):
            d.s("POST", "/url", {"url": "about:blank"})
            d.s("POST", "/url", {"url": a.url})
            ready(d)
            first.append(d.js("return ember.timing.firstFlame;"))
        out["first_ms"] = first
        out["first_nodes"] = d.js("return ember.flame.data.nodes;")
        out["first_hottest"] = d.js(
            "return document.getElementById('flame').dataset.hottest;")
        out["big"] = []
        for url in a.big:
            d.s("POST", "/url", {"url": url})
            ready(d)
            r = d.js(REDRAW_JS, a.redraws)
            r["first_ms"] = d.js("return ember.timing.firstFlame;")
            out["big"].append(r)
    finally:
        d.quit()
        proc.terminate()
    out["first_median_ms"] = statistics.median(out["first_ms"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
