"""tests/e2e/lib/pyroscope_push.py: Connect calls to Pyroscope's push API,
built by an encoder independent of Ember's (Python's protobuf runtime over
classes protoc compiled from proto/pyroscope/*.proto), as Grafana Alloy's
pyroscope.write sends them. Used by tests/e2e/pyroscope_push.sh.

usage: pyroscope_push.py GENDIR URL CASE PPROF...
  GENDIR  where protoc --python_out wrote push_pb2.py and types_pb2.py
  CASE    one of:
    good     every PPROF as a sample of series service_name=pushed, one
             series per file (label file=N), __name__ process_cpu: 200
    gzip     the same request, Content-Encoding: gzip: 200
    partial  a good sample, then one that is not a profile: 400
             invalid_argument, and nothing of the request stored
    garbage  bytes that are not a PushRequest: 400 invalid_argument
    json     the good request as JSON (protobuf's JSON mapping, by
             Python's json_format), series service_name=pushed-json: 200
    badjson  JSON that is not a PushRequest's: 400 invalid_argument
Prints "STATUS BODY" of the answer.
"""
import gzip
import json
import sys
import urllib.error
import urllib.request

sys.path.insert(0, sys.argv[1])
from google.protobuf import json_format  # noqa: E402
from proto.pyroscope import push_pb2  # noqa: E402


def message(files, junk=False, service="pushed"):
    req = push_pb2.PushRequest()
    for i, path in enumerate(files):
        s = req.series.add()
        for name, value in (("__name__", "process_cpu"),
                            ("service_name", service),
                            ("file", str(i)), ("__delta__", "false")):
            lp = s.labels.add()
            lp.name, lp.value = name, value
        with open(path, "rb") as f:
            s.samples.add(raw_profile=f.read(), ID="id-%d" % i)
    if junk:
        s = req.series.add()
        lp = s.labels.add()
        lp.name, lp.value = "service_name", "pushed"
        s.samples.add(raw_profile=b"this is not a profile", ID="junk")
    return req


def request(files, junk=False):
    return message(files, junk).SerializeToString()


def post(url, body, headers):
    r = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(r) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main():
    url, case, files = sys.argv[2], sys.argv[3], sys.argv[4:]
    proto = {"Content-Type": "application/proto",
             "Connect-Protocol-Version": "1"}
    if case == "good":
        st, body = post(url, request(files), proto)
    elif case == "gzip":
        st, body = post(url, gzip.compress(request(files)),
                        dict(proto, **{"Content-Encoding": "gzip"}))
    elif case == "partial":
        st, body = post(url, request(files[:1], junk=True), proto)
    elif case == "garbage":
        st, body = post(url, b"\xff\xff\xff\xff garbage", proto)
    elif case == "json":
        body = json_format.MessageToJson(message(files, service="pushed-json"))
        st, body = post(url, body.encode(),
                        {"Content-Type": "application/json"})
        if st == 200:
            json.loads(body)            # the answer is JSON too
    elif case == "badjson":
        st, body = post(url, b'{"series":[{"samples":[{"rawProfile":7}]}]}',
                        {"Content-Type": "application/json"})
    else:
        sys.exit("unknown case " + case)
    print(st, body.decode("utf-8", "replace"))


main()
