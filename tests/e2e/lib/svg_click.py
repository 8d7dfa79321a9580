#!/usr/bin/env python3
"""tests/e2e/lib/svg_click.py: opens an `ember query -o svg` flame graph in
headless Chromium and checks that it works as a person would use it: a real
click (WebDriver element click) zooms a frame to the full width and hides its
siblings, hovering fills the status line, typing into the search box
highlights matching frames, and "Reset Zoom" restores the picture.

Talks the W3C WebDriver protocol to chromedriver over HTTP with the standard
library only (urllib + json), so it needs nothing but python3, chromium and
chromium-driver.

usage: svg_click.py FILE.svg [--frame NAME] [--search TERM]
         [--chromedriver PATH] [--chromium PATH] [--screenshot OUT.png]
Exits 0 with "ok: ..." on success, 1 with "FAIL: ..." naming what failed.
"""
import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"   # W3C element reference key
FULL_X, FULL_W = 10.0, 1180.0                       # the renderer's frame area


class Fail(Exception):
    """A check that did not hold; its text is the report."""


class Driver:
    """A minimal W3C WebDriver client for one session."""

    def __init__(self, url):
        self.url = url
        self.sid = None

    def call(self, method, path, body=None, timeout=60):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type":
                                              "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                reply = json.loads(r.read().decode() or "{}")
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                v = json.loads(text).get("value", {})
                text = "%s: %s" % (v.get("error"), v.get("message"))
            except ValueError:
                pass
            raise Fail("webdriver %s %s: HTTP %d: %s"
                       % (method, path, e.code, text[:400]))
        return reply.get("value")

    def session(self, chromium):
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--window-size=1280,1000"]}}}}
        v = self.call("POST", "/session", caps, timeout=120)
        self.sid = v["sessionId"]

    def s(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.sid, path), body)

    def js(self, script, *args):
        return self.s("POST", "/execute/sync",
                      {"script": script, "args": list(args)})

    def find(self, css):
        v = self.s("POST", "/element", {"using": "css selector", "value": css})
        return v[ELEMENT]

    def click(self, css):
        self.s("POST", "/element/%s/click" % self.find(css), {})

    def hover(self, css):
        el = {ELEMENT: self.find(css)}
        self.s("POST", "/actions", {"actions": [{
            "type": "pointer", "id": "mouse",
            "parameters": {"pointerType": "mouse"},
            "actions": [{"type": "pointerMove", "duration": 0,
                         "origin": el, "x": 0, "y": 0}]}]})

    def quit(self):
        if self.sid is not None:
            try:
                self.s("DELETE", "")
            except (Fail, OSError):
                pass
            self.sid = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_chromedriver(path, port):
    proc = subprocess.Popen([path, "--port=%d" % port],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    d = Driver("http://127.0.0.1:%d" % port)
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise Fail("chromedriver exited with status %d" % proc.returncode)
        try:
            if d.call("GET", "/status", timeout=2).get("ready"):
                return proc, d
        except (Fail, OSError, ValueError):
            pass
        time.sleep(0.1)
    proc.kill()
    raise Fail("chromedriver did not become ready on port %d" % port)


# Frame facts read from the page: index in #f (1-based for nth-child), name,
# geometry, visibility, classes.
FRAMES_JS = """
var gs = document.querySelectorAll('#f>g'), out = [];
for (var i = 0; i < gs.length; i++) {
  var g = gs[i], r = g.querySelector('rect'), t = g.querySelector('title');
  out.push({k: i + 1, name: t.textContent.split('\\n')[0],
            x: parseFloat(r.getAttribute('x')),
            w: parseFloat(r.getAttribute('width')),
            y: parseFloat(r.getAttribute('y')),
            shown: getComputedStyle(g).display !== 'none',
            cls: g.getAttribute('class') || ''});
}
return out;
"""


def pick(frames, name):
    """The frame to click: NAME's widest, or the widest non-root frame that
    has a sibling row-mate and does not already span the width."""
    cands = [f for f in frames[1:] if f["w"] < FULL_W - 0.01]
    if name:
        cands = [f for f in cands if f["name"] == name]
        if not cands:
            raise Fail("no frame named %r narrower than the width" % name)
    cands = [f for f in cands
             if any(o["y"] == f["y"] and o is not f for o in frames)]
    if not cands:
        raise Fail("no frame with a sibling to click")
    return max(cands, key=lambda f: f["w"])


def is_desc(f, z):
    return (f["y"] <= z["y"] and f["x"] >= z["x"] - 1e-6
            and f["x"] + f["w"] <= z["x"] + z["w"] + 1e-6)


def check_zoom(d, before, z):
    after = d.js(FRAMES_JS)
    now = after[z["k"] - 1]
    if abs(now["x"] - FULL_X) > 0.01 or abs(now["w"] - FULL_W) > 0.01:
        raise Fail("clicked %r: rect is x=%s width=%s, not the full width "
                   "%s..%s" % (z["name"], now["x"], now["w"], FULL_X,
                               FULL_X + FULL_W))
    sibs = [b for b in before if b["y"] == z["y"] and b["k"] != z["k"]]
    shown = [after[b["k"] - 1]["name"] for b in sibs
             if after[b["k"] - 1]["shown"]]
    if shown:
        raise Fail("after zooming %r its row-mates are still shown: %s"
                   % (z["name"], shown[:5]))
    for b in before:                    # descendants scale by the same factor
        a = after[b["k"] - 1]
        if b["k"] != z["k"] and is_desc(b, z):
            want = b["w"] * FULL_W / z["w"]
            if not a["shown"] or abs(a["w"] - want) > 0.05 * want + 0.01:
                raise Fail("descendant %r: width %s, want about %.3f"
                           % (b["name"], a["w"], want))
        if b["y"] > z["y"] and b["x"] <= z["x"] and \
                b["x"] + b["w"] >= z["x"] + z["w"]:
            if not a["shown"] or abs(a["w"] - FULL_W) > 0.01:
                raise Fail("ancestor %r not shown at full width" % b["name"])
    if not d.js("return getComputedStyle(document.getElementById('unzoom'))"
                ".display !== 'none';"):
        raise Fail("'Reset Zoom' is not shown after a zoom")
    return len(sibs)


def check_hover(d, z):
    d.hover("#f>g:nth-child(%d)>rect" % z["k"])
    text = d.js("return document.getElementById('details').textContent;")
    if not text.startswith(z["name"] + ": ") or "%" not in text:
        raise Fail("hovering %r: status line is %r" % (z["name"], text))
    return text


def check_search(d, term):
    q = d.find("#q")
    # click first, as a person would: Element Send Keys alone does not
    # focus an input inside an svg document's foreignObject
    d.s("POST", "/element/%s/click" % q, {})
    d.s("POST", "/element/%s/clear" % q, {})
    d.s("POST", "/element/%s/value" % q, {"text": term})
    got = d.js("return document.querySelectorAll('#f>g.hl').length;")
    want = d.js("""var re = new RegExp(arguments[0]), n = 0,
        gs = document.querySelectorAll('#f>g');
      for (var i = 1; i < gs.length; i++)
        if (re.test(gs[i].querySelector('title').textContent.split('\\n')[0]))
          n++;
      return n;""", term)
    matched = d.js("return document.getElementById('matched').textContent;")
    if want == 0:
        raise Fail("search '%s': no frame matches it; pick another term" % term)
    if got != want:
        raise Fail("search '%s' highlighted %d frames, %d match" %
                   (term, got, want))
    if not matched.startswith("Matched: ") or "%" not in matched:
        raise Fail("search '%s': matched line is %r" % (term, matched))
    # a term that is no regex ("(") is looked for as a substring
    n = d.js("return search('(');")
    want = d.js("""var n = 0, gs = document.querySelectorAll('#f>g');
      for (var i = 1; i < gs.length; i++)
        if (gs[i].querySelector('title').textContent.split('\\n')[0]
              .indexOf('(') >= 0)
          n++;
      return n;""")
    if n != want:
        raise Fail("search '(' (not a regex) highlighted %d frames, %d "
                   "hold a '('" % (n, want))
    d.js("search('');")
    if d.js("return document.querySelectorAll('#f>g.hl').length;") != 0:
        raise Fail("an empty search left highlights")
    return got, matched


def check_reset(d, before, z):
    d.click("#unzoom")
    after = d.js(FRAMES_JS)
    for b in before:
        a = after[b["k"] - 1]
        if not a["shown"] or abs(a["x"] - b["x"]) > 0.001 or \
                abs(a["w"] - b["w"]) > 0.001:
            raise Fail("after Reset Zoom %r is at x=%s width=%s shown=%s, "
                       "was x=%s width=%s" % (b["name"], a["x"], a["w"],
                                              a["shown"], b["x"], b["w"]))
    if d.js("return getComputedStyle(document.getElementById('unzoom'))"
            ".display !== 'none';"):
        raise Fail("'Reset Zoom' still shown after the reset")


def run(args):
    for p in (args.chromedriver, args.chromium):
        if not os.access(p, os.X_OK):
            raise Fail("%s is missing: `make deps` installs chromium and "
                       "chromium-driver" % p)
    svg = os.path.abspath(args.svg)
    proc, d = start_chromedriver(args.chromedriver, free_port())
    try:
        d.session(args.chromium)
        d.s("POST", "/url", {"url": "file://" + svg})
        before = d.js(FRAMES_JS)
        if len(before) < 3:
            raise Fail("%s has %d frames; need a profile with siblings"
                       % (svg, len(before)))
        z = pick(before, args.frame)
        status = check_hover(d, z)
        d.click("#f>g:nth-child(%d)>rect" % z["k"])
        nsib = check_zoom(d, before, z)
        if args.screenshot:
            png = d.s("GET", "/screenshot")
            with open(args.screenshot, "wb") as f:
                f.write(base64.b64decode(png))
        hits, matched = check_search(d, args.search or
                                     z["name"].replace(".", "\\."))
        check_reset(d, before, z)
    finally:
        d.quit()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("ok: %d frames; clicked %r (x=%s width=%s): it spans the width, "
          "%d row-mates hidden; status %r; search highlighted %d (%s); reset "
          "restored every frame" % (len(before), z["name"], z["x"], z["w"],
                                    nsib, status, hits, matched))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("svg")
    ap.add_argument("--frame", help="name of the frame to click")
    ap.add_argument("--search", help="regex to type into the search box")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--screenshot", help="write a PNG after the zoom")
    args = ap.parse_args()
    try:
        run(args)
    except Fail as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)
    except (OSError, KeyError, ValueError) as e:
        print("FAIL: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
