"""tests/e2e/lib/leaf_agree.py: do two samplers see the same functions?
Used by tests/e2e/record.sh to judge `ember record` against `perf record`
run at the same time on the same processes (issue 12).

usage: leaf_agree.py LABEL PERF EMBER [ELF...]
  PERF   `perf script -F ip,sym,dso` of the process: callchains, leaf
         first, a blank line after each
  EMBER  Ember's collapsed stacks of it ("a;b;leaf COUNT")
  ELF    the user files whose symbols may name the frames (the program
         and its libraries); /proc/kallsyms gives the kernel's

Each sample counts for its innermost user frame: the function the process
was running, its time in the kernel charged to the function that made
the system call. Where in the kernel a cpu-clock sample lands is not the
samplers' to choose: the timer interrupt of a sample that falls where
interrupts are off waits for them to come back on (do_syscall_64 after
the entry), and two samplers' timers, at one frequency but their own
phase, see that differently for a whole run (perf 0% do_syscall_64 in
one run, 12% in the next, Ember 8-11%).

Every function of either side is compared, with no cut on its share that
a function could sit near: a test that flips on whether `read` is at
4.9% or 5.1% said nothing about the sampler (issue 12). The two shares of
a function must agree within the sampling error of a difference of two
binomial shares: 5 sigmas of the pooled share (a false alarm about once
in 1.7 million comparisons), and at least 2 points for what differs
between the runs without being noise (they start a few milliseconds
apart). Names are compared by what they name: a symbol's aliases (glibc's
read is also __read, __libc_read and __GI___libc_read, and perf and Ember
choose among them differently) are one function when the name is at one
address of one file.

Prints the functions whose shares differ and the largest shares, and
exits 1 when any disagree (or when either side has no samples).
"""
import math
import os
import re
import subprocess
import sys

# "    ffffffff816bb9e0 ksys_write ([kernel.kallsyms])": address, name, file
FRAME = re.compile(r'^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)$')
KERNEL_ONLY = '(no user frame)'
SYM = re.compile(r'^\s*\d+:\s+([0-9a-f]+)\s+\S+\s+(FUNC|IFUNC|NOTYPE)\s+'
                 r'\S+\s+\S+\s+(\S+)\s+(\S+)')


def debug_file(path):
    """The separate debuginfo of PATH by its build id, or None."""
    out = subprocess.run(['readelf', '-n', path], capture_output=True,
                         text=True).stdout
    m = re.search(r'Build ID: ([0-9a-f]{2})([0-9a-f]+)', out)
    if m is None:
        return None
    p = '/usr/lib/debug/.build-id/%s/%s.debug' % (m.group(1), m.group(2))
    return p if os.path.exists(p) else None


def elf_places(path, places):
    """Adds (name, (path, address)) for every defined code symbol of PATH
    and of its debuginfo, versions ("read@@GLIBC_2.2.5") cut."""
    for f in (path, debug_file(path)):
        if f is None:
            continue
        out = subprocess.run(['readelf', '-sW', f], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            m = SYM.match(line)
            if m and m.group(3) != 'UND':
                name = m.group(4).split('@', 1)[0]
                places.setdefault(name, set()).add((path, int(m.group(1), 16)))


def kernel_places(places):
    try:
        with open('/proc/kallsyms') as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[1] in 'tTwW':
                    places.setdefault(parts[2], set()).add(
                        ('kernel', int(parts[0], 16)))
    except OSError:
        pass


def key(name, places):
    """What NAME names: one address of one file, else the name itself."""
    p = places.get(name, set())
    return next(iter(p)) if len(p) == 1 else ('name', name)


def main():
    label, perf_path, ember_path = sys.argv[1:4]
    places = {}
    for elf in sys.argv[4:]:
        elf_places(elf, places)
    kernel_places(places)
    counts = [{}, {}]           # key -> samples: perf's, Ember's
    names = {}                  # key -> the names the two sides used

    def add(side, name, n):
        k = key(name, places)
        counts[side][k] = counts[side].get(k, 0) + n
        names.setdefault(k, [set(), set()])[side].add(name)

    with open(perf_path) as f:
        for block in f.read().split('\n\n'):
            user = [m.group(1) for m in map(FRAME.match, block.splitlines())
                    if m and m.group(2) != '[kernel.kallsyms]']
            if block.strip():
                add(0, user[0] if user else KERNEL_ONLY, 1)
    user_names = {n for n, p in places.items() if any(f != 'kernel'
                                                       for f, _ in p)}
    with open(ember_path) as f:
        for line in f:
            stack, _, n = line.rstrip('\n').rpartition(' ')
            if not stack:
                continue
            frames = stack.split(';')
            while frames and frames[-1] not in user_names and \
                    frames[-1] in places:
                frames.pop()    # a kernel frame: above every user frame
            add(1, frames[-1] if frames else KERNEL_ONLY, int(n))
    tp, te = sum(counts[0].values()), sum(counts[1].values())
    if tp == 0 or te == 0:
        print('%s: %d samples in perf, %d in ember' % (label, tp, te))
        return 1
    rows, bad = [], 0
    for k in names:
        p, e = counts[0].get(k, 0), counts[1].get(k, 0)
        pooled = (p + e) / (tp + te)
        sigma = math.sqrt(pooled * (1 - pooled) * (1 / tp + 1 / te))
        tol = max(5 * sigma, 0.02)
        diff = abs(p / tp - e / te)
        shown = '='.join(sorted(names[k][0] | names[k][1]))
        rows.append((max(p / tp, e / te), shown, p / tp, e / te, tol,
                     diff > tol))
        bad += diff > tol
    rows.sort(reverse=True)
    out = ['%s %.1f%%/%.1f%% (+-%.1f)%s' % (s, 100 * a, 100 * b, 100 * t,
                                             ' DIFFERS' if d else '')
           for _, s, a, b, t, d in rows if d or _ >= 0.05]
    print('%s (%d samples in perf, %d in ember; perf/ember): %s' %
          (label, tp, te, ', '.join(out)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
