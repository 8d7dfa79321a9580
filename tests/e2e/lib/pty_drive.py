#!/usr/bin/env python3
"""tests/e2e/lib/pty_drive.py: runs a command in a pseudo-terminal and plays
a scenario against it, as a person at a terminal would (python3's standard
library only: pty, os, select, termios).

usage: pty_drive.py [--rows N] [--cols N] [--timeout S] [--log FILE]
                    -- COMMAND [ARG...]  < SCENARIO

The scenario is read from stdin, one step a line ('#' lines and blank
lines are skipped):

    send TEXT       write TEXT to the terminal once the program reads it in
                    raw mode (at its prompt); escapes as in Python strings:
                    \\t tab, \\r enter, \\x1b[A up-arrow, \\x03 ^C, \\x04 ^D
    expect REGEX    wait until REGEX (Python re, MULTILINE) matches what the
                    command wrote since the previous expect's match; escape
                    sequences and carriage returns are taken out first
    sleep SECONDS   wait
    exit STATUS     wait for the command to exit with STATUS

Exit status 0 when every step passed; otherwise 1 with the failing step and
the end of what the terminal showed on stderr (and the whole transcript in
--log FILE).
"""
import argparse
import codecs
import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

# CSI sequences (cursor moves, colors, erase), OSC titles, charset picks,
# keypad modes, then backspaces and the bell.
ANSI = re.compile(r"\x1b\[[0-9;?<=>]*[ -/]*[@-~]"
                  r"|\x1b\][^\x07\x1b]*(\x07|\x1b\\)"
                  r"|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b[@-Z\\-_]")
CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(raw):
    """The terminal's output as text, without control sequences."""
    text = raw.decode("utf-8", "replace")
    return CTRL.sub("", ANSI.sub("", text.replace("\r\n", "\n")))


class Term:
    def __init__(self, argv, rows, cols, timeout):
        self.timeout = timeout
        self.raw = b""
        self.seen = 0           # offset in clean(raw) already matched
        self.status = None
        self.pid, self.fd = pty.fork()
        if self.pid == 0:       # the child: size its terminal, then run
            try:
                winsz = struct.pack("HHHH", rows, cols, 0, 0)
                fcntl.ioctl(0, termios.TIOCSWINSZ, winsz)
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)

    def pump(self, wait):
        """Reads what is there within WAIT seconds; False once closed."""
        r, _, _ = select.select([self.fd], [], [], wait)
        if not r:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:         # EIO: the child closed its side
            return False
        if not data:
            return False
        self.raw += data
        return True

    def wait_raw(self):
        """Waits until the program reads its terminal in raw mode, as a line
        editor does at its prompt: what is typed earlier, in the cooked mode
        between prompts, the kernel echoes and may handle itself (^C, ^D)."""
        end = time.monotonic() + self.timeout
        while time.monotonic() < end:
            try:
                if not termios.tcgetattr(self.fd)[3] & termios.ICANON:
                    return
            except termios.error:
                return
            if not self.pump(0.02):
                return

    def send(self, text):
        self.wait_raw()
        os.write(self.fd, text.encode("utf-8"))

    def expect(self, pattern):
        rx = re.compile(pattern, re.MULTILINE)
        end = time.monotonic() + self.timeout
        while True:
            m = rx.search(clean(self.raw), self.seen)
            if m:
                self.seen = m.end()
                return True
            left = end - time.monotonic()
            if left <= 0 or not self.pump(min(left, 0.2)):
                m = rx.search(clean(self.raw), self.seen)
                if m:
                    self.seen = m.end()
                    return True
                return False

    def wait_exit(self):
        end = time.monotonic() + self.timeout
        while time.monotonic() < end:
            self.pump(0.05)
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.status = os.waitstatus_to_exitcode(st)
                return self.status
        return None

    def kill(self):
        if self.status is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except OSError:
                pass


def run(term, steps):
    for lineno, line in steps:
        verb, _, arg = line.partition(" ")
        if verb == "send":
            term.send(codecs.decode(arg, "unicode_escape"))
        elif verb == "expect":
            if not term.expect(arg):
                return "line %d: expect %s: not seen" % (lineno, arg)
        elif verb == "sleep":
            time.sleep(float(arg))
        elif verb == "exit":
            st = term.wait_exit()
            if st is None:
                return "line %d: the command did not exit" % lineno
            if st != int(arg):
                return "line %d: exit status %d, wanted %s" % (lineno, st, arg)
        else:
            return "line %d: unknown step %r" % (lineno, verb)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--cols", type=int, default=80)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--log")
    ap.add_argument("argv", nargs="+")
    a = ap.parse_args()
    steps = [(i + 1, l.rstrip("\n")) for i, l in enumerate(sys.stdin)
             if l.strip() and not l.lstrip().startswith("#")]
    term = Term(a.argv, a.rows, a.cols, a.timeout)
    try:
        err = run(term, steps)
    finally:
        term.kill()
    if a.log:
        with open(a.log, "w") as f:
            f.write(clean(term.raw))
    if err:
        tail = clean(term.raw)[-1500:]
        sys.stderr.write("pty_drive: %s\n--- terminal (end) ---\n%s\n---\n"
                         % (err, tail))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
