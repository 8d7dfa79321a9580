"""tests/e2e/lib/pyroscope_query.py: Grafana's calls to Pyroscope's querier,
made on `ember serve` with an encoder independent of Ember's (Python's
protobuf over protoc's compile of proto/pyroscope/*.proto). Used by
tests/e2e/pyroscope_push.sh.

usage: pyroscope_query.py GENDIR BASEURL CASE ARGS...
With CODEC=json in the environment, requests and answers are JSON
(protobuf's JSON mapping, by Python's json_format) instead of protobuf.

  health                 ProfileTypes with start=1000, end=4000 (Grafana's
                         health check): prints the type IDs
  labels MATCHER         LabelNames: prints the names
  values NAME MATCHER    LabelValues: prints the values
  series MATCHER         Series: prints each label set, k=v,k=v
  flame TYPE SELECTOR MAX
                         SelectMergeStacktraces: prints the flame graph's
                         stacks as collapsed lines "root;..;leaf SELF" (a
                         node's self on its path), summed per path, then
                         "total N"
  totals TYPE SELECTOR STEP GROUPBY
                         SelectSeries: prints "labels sum-of-points" per
                         series
  profile TYPE SELECTOR  SelectMergeProfile: prints the pprof's stacks as
                         collapsed lines "root;..;leaf VALUE", summed
  diff TYPE LSEL LSTART LEND RSEL RSTART REND
                         Diff: prints each path's self on both sides,
                         "root;..;leaf LEFT RIGHT", then "ticks L R"
  bad                    a method Ember does not serve: prints the status
                         and Connect code
"""
import collections
import json
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, sys.argv[1])
from google.protobuf import json_format  # noqa: E402
from proto import profile_pb2  # noqa: E402
from proto.pyroscope import querier_pb2, types_pb2  # noqa: E402

JSON = os.environ.get("CODEC") == "json"

BASE = sys.argv[2]


def call(method, req, resp_cls):
    body = (json_format.MessageToJson(req).encode() if JSON
            else req.SerializeToString())
    r = urllib.request.Request(
        BASE + "/querier.v1.QuerierService/" + method,
        data=body, method="POST",
        headers={"Content-Type": "application/json" if JSON
                 else "application/proto",
                 "Connect-Protocol-Version": "1"})
    try:
        with urllib.request.urlopen(r) as resp:
            out = resp_cls()
            if JSON:
                json_format.Parse(resp.read(), out)
            else:
                out.ParseFromString(resp.read())
            return out
    except urllib.error.HTTPError as e:
        body = e.read().decode("utf-8", "replace")
        sys.exit("%s: HTTP %d %s" % (method, e.code, body))


def flame_paths(fg):
    """Each node's self on its path of names, from the levels."""
    paths = collections.Counter()
    prev = []                  # the level above: (x, total, path)
    for level in fg.levels:
        v, x, cur = level.values, 0, []
        for i in range(0, len(v), 4):
            x += v[i]
            total, self, name = v[i + 1], v[i + 2], fg.names[v[i + 3]]
            parent = [p for p in prev if p[0] <= x < p[0] + p[1] or
                      (p[1] == 0 and p[0] == x)]
            path = (parent[0][2] + [name]) if parent else [name]
            cur.append((x, total, path))
            if self and len(path) > 1:
                paths[";".join(path[1:])] += self
            x += total
        prev = cur
    return paths


def diff_paths(fg):
    """Each node's self on both sides on its path, from the levels: a
    node's parent is the one above whose span holds it on a side where it
    has width."""
    paths = collections.defaultdict(lambda: [0, 0])
    prev = []                  # the level above: (xl, tl, xr, tr, path)
    for level in fg.levels:
        v, xl, xr, cur = level.values, 0, 0, []
        for i in range(0, len(v), 7):
            xl += v[i]
            xr += v[i + 3]
            tl, sl, tr, sr = v[i + 1], v[i + 2], v[i + 4], v[i + 5]
            name = fg.names[v[i + 6]]
            parent = [p for p in prev
                      if (tl > 0 and p[0] <= xl < p[0] + p[1]) or
                      (tl == 0 and p[2] <= xr < p[2] + p[3])]
            path = (parent[0][4] + [name]) if parent else [name]
            cur.append((xl, tl, xr, tr, path))
            if (sl or sr) and len(path) > 1:
                paths[";".join(path[1:])][0] += sl
                paths[";".join(path[1:])][1] += sr
            xl += tl
            xr += tr
        prev = cur
    return paths


def pprof_paths(p):
    """The pprof's stacks, root first, each line of a location a frame
    (its first line the innermost), summed per path."""
    s = p.string_table
    fn = {f.id: s[f.name] for f in p.function}
    loc = {l.id: [fn[ln.function_id] for ln in l.line] for l in p.location}
    paths = collections.Counter()
    for smp in p.sample:
        frames = []
        for lid in smp.location_id:
            frames.extend(loc[lid])
        paths[";".join(reversed(frames))] += smp.value[0]
    return paths


def main():
    case, args = sys.argv[3], sys.argv[4:]
    if case == "health":
        r = call("ProfileTypes",
                 querier_pb2.ProfileTypesRequest(start=1000, end=4000),
                 querier_pb2.ProfileTypesResponse)
        for t in r.profile_types:
            print(t.ID, t.name, t.sample_type, t.sample_unit, t.period_type,
                  t.period_unit)
    elif case == "labels":
        r = call("LabelNames", types_pb2.LabelNamesRequest(matchers=args),
                 types_pb2.LabelNamesResponse)
        print("\n".join(r.names))
    elif case == "values":
        r = call("LabelValues",
                 types_pb2.LabelValuesRequest(name=args[0], matchers=args[1:]),
                 types_pb2.LabelValuesResponse)
        print("\n".join(r.names))
    elif case == "series":
        r = call("Series", querier_pb2.SeriesRequest(matchers=args),
                 querier_pb2.SeriesResponse)
        for ls in r.labels_set:
            print(",".join("%s=%s" % (l.name, l.value) for l in ls.labels))
    elif case == "flame":
        r = call("SelectMergeStacktraces",
                 querier_pb2.SelectMergeStacktracesRequest(
                     profile_typeID=args[0], label_selector=args[1],
                     start=0, end=4102444800000, max_nodes=int(args[2])),
                 querier_pb2.SelectMergeStacktracesResponse)
        for path, v in sorted(flame_paths(r.flamegraph).items()):
            print(path, v)
        print("total", r.flamegraph.total)
    elif case == "totals":
        r = call("SelectSeries",
                 querier_pb2.SelectSeriesRequest(
                     profile_typeID=args[0], label_selector=args[1],
                     start=0, end=4102444800000, step=float(args[2]),
                     group_by=args[3:]),
                 querier_pb2.SelectSeriesResponse)
        for s in r.series:
            print(",".join("%s=%s" % (l.name, l.value) for l in s.labels),
                  int(sum(p.value for p in s.points)))
    elif case == "profile":
        p = call("SelectMergeProfile",
                 querier_pb2.SelectMergeProfileRequest(
                     profile_typeID=args[0], label_selector=args[1],
                     start=0, end=4102444800000),
                 profile_pb2.Profile)
        for path, v in sorted(pprof_paths(p).items()):
            if v:
                print(path, v)
    elif case == "diff":
        def side(sel, start, end):
            return querier_pb2.SelectMergeStacktracesRequest(
                profile_typeID=args[0], label_selector=sel,
                start=int(start), end=int(end), max_nodes=1 << 20)
        r = call("Diff", querier_pb2.DiffRequest(
                     left=side(*args[1:4]), right=side(*args[4:7])),
                 querier_pb2.DiffResponse)
        for path, (l, rv) in sorted(diff_paths(r.flamegraph).items()):
            print(path, l, rv)
        print("ticks", r.flamegraph.leftTicks, r.flamegraph.rightTicks)
    elif case == "bad":
        req = urllib.request.Request(
            BASE + "/querier.v1.QuerierService/SelectHeatmap", data=b"",
            method="POST", headers={"Content-Type": "application/proto"})
        try:
            urllib.request.urlopen(req)
            print("200")
        except urllib.error.HTTPError as e:
            print(e.code, json.loads(e.read())["code"])
    else:
        sys.exit("unknown case " + case)


main()
