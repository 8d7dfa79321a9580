#!/usr/bin/env python3
"""bench/focus_pages.py: how many pages of stacks a focus would read.

Reads a merged profile as collapsed stacks (`ember query ... -o
collapsed`: "root;...;leaf value" per line), numbers the stack tree
depth-first as merged blocks do (children in the order first met), and
for every function found in 1% to 5% of the stacks counts the runs of
consecutive stack ids through it and the share of pages of PAGE
consecutive stacks (64 unless given) that hold at least one: what a
focus on that function would read of columns cut into pages by stack.

    python3 bench/focus_pages.py FILE [PAGE]

Prints the median share over those functions and the eight most common.
The share falls as pages shrink: compare profiles at equal page counts
(PAGE = stacks / 40, say), not at equal PAGE.
"""
import collections
import sys


def read(path):
    stacks = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                s, _, _ = line.rpartition(" ")
                stacks.append(tuple(s.split(";")))
    return stacks


def dfs_ids(stacks):
    root = {}
    for fr in stacks:
        n = root
        for f in fr:
            n = n.setdefault(f, {})
    ids, stack = {}, [((), root)]
    while stack:                    # preorder, children in first-met order
        path, node = stack.pop()
        if path:
            ids[path] = len(ids)
        for f in reversed(list(node)):
            stack.append((path + (f,), node[f]))
    return ids


def main():
    page = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    stacks = read(sys.argv[1])
    ids = dfs_ids(stacks)
    order = sorted(stacks, key=lambda fr: ids[fr])
    through = collections.defaultdict(list)
    for i, fr in enumerate(order):
        for f in set(fr):
            through[f].append(i)
    npages = (len(order) + page - 1) // page
    rows = []
    for f, ix in through.items():
        share = len(ix) / len(order)
        if 0.01 <= share <= 0.05 and len(ix) >= 20:
            runs = 1 + sum(1 for a, b in zip(ix, ix[1:]) if b != a + 1)
            pages = len({i // page for i in ix}) / npages
            rows.append((share, runs, pages, f))
    rows.sort(reverse=True)
    med = sorted(r[2] for r in rows)[len(rows) // 2] if rows else 0
    print("%d stacks, %d functions in 1-5%% of them; median share of "
          "%d-stack pages holding one: %.2f" % (len(order), len(rows), page,
                                                med))
    for share, runs, pages, f in rows[:8]:
        print("  %.3f of stacks, %4d runs, %.2f of pages: %s"
              % (share, runs, pages, f[:70]))


if __name__ == "__main__":
    main()
