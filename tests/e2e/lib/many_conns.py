"""tests/e2e/lib/many_conns.py: N keep-alive connections to one server at
once, as many clients hold them: every connection is opened first, then
each sends REQS requests one after another on its own connection while
all stay open, until every one has its answers: so the server holds all N
at once, whatever order it accepts and answers them in. Prints "ok N R" (connections, 200 answers) or each failure.
No timing is measured or asserted; a slow answer is waited for.

usage: many_conns.py HOST PORT N REQS PATH
"""
import asyncio
import sys


async def answer(reader):
    """One HTTP/1.1 answer: its status and whether the server keeps the
    connection open."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length, close = 0, False
    for h in lines[1:]:
        k, _, v = h.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
        if k.strip().lower() == "connection" and "close" in v.lower():
            close = True
    await reader.readexactly(length)
    return status, close


async def client(host, port, reqs, path, opened, go):
    reader, writer = await asyncio.open_connection(host, port)
    opened.release()
    await go.wait()
    got = []
    for _ in range(reqs):
        writer.write(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host))
                     .encode())
        await writer.drain()
        status, close = await answer(reader)
        got.append(status)
        if close:
            got.append("closed")
            break
    return got, writer


async def main():
    host, port, n, reqs, path = (sys.argv[1], int(sys.argv[2]),
                                 int(sys.argv[3]), int(sys.argv[4]),
                                 sys.argv[5])
    opened = asyncio.Semaphore(0)
    go = asyncio.Event()
    tasks = [asyncio.create_task(client(host, port, reqs, path, opened, go))
             for _ in range(n)]
    for _ in range(n):              # every connection open before any asks
        await opened.acquire()
    go.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for r in results:               # closed once all are answered
        if not isinstance(r, BaseException):
            r[1].close()
    results = [r if isinstance(r, BaseException) else r[0]
               for r in results]
    bad = [r for r in results
           if isinstance(r, BaseException) or r != [200] * reqs]
    if bad:
        for r in bad[:5]:
            print("failed:", repr(r))
        print("%d of %d connections failed" % (len(bad), n))
        sys.exit(1)
    print("ok", n, n * reqs)


asyncio.run(main())
