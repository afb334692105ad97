#!/usr/bin/env python3
"""The 41-byte misplacement of docs/investigations/kernel-41-bytes/README.md, reproduced without nena.

Plain MPTCP sockets (Python standard library), in namespaces built by
docs/investigations/kernel-41-bytes/mptcp-41-repro.py's `setup` (bare veths, in-kernel path manager, the client's
`subflow` endpoint on its untrusted address): N connections open at once, each does what a
small nena proxy session does, with the same sizes and order:

  client: 80 B (a 78-byte "hello" and the connection's number), reads 76 B,
          then 41 B with one send() and 63 B (first byte 0x17) with another
  server: reads the 80 B, answers 76 B, reads 104 B and compares them with what this
          connection's client sent; answers one byte (K: intact, X: not) and closes

The server is one asyncio loop for every connection, as nena's servers are one runtime.
Every misplaced connection is printed with what arrived against what was sent, and where
the wrong bytes came from.

  docs/investigations/kernel-41-bytes/mptcp-41-small.py run [--prefix k41s] [--rounds 15] [--conns 6500]
      [--one-send] [--client-wait MS] [--server-lowat] [--server-wait MS]
      [--then BYTES [--bundle]]

Variants: --one-send, the client sends the 104 bytes with one send(); --client-wait MS, it
waits MS milliseconds after the answer before its writes; --server-lowat, the server sets
SO_RCVLOWAT to 1 MiB and back to 1 after its answer (as nena's servers do once);
--server-wait MS, the server waits MS milliseconds after its answer before reading;
--then BYTES, the client sends BYTES more with a further send() after the 104 (a `--forward`
proxy client's first application record after its opening); --bundle, those BYTES go in the
same send() as the 104 (one send of 104 + BYTES).

exits 3 when a connection got bytes out of place, 0 when none did; it removes its
namespaces at the end, also on failure or Ctrl-C. Needs root.
"""
import argparse
import asyncio
import errno
import importlib.util
import json
import os
import resource
import socket
import subprocess
import sys
import time

IPPROTO_MPTCP = 262
SERVER = "198.18.3.2"
HELLO = bytes(range(78))
ANSWER = bytes(range(100, 176))


def upload(i, then=0):
    """The 41-byte and the 63-byte writes of connection `i` (mod 65536), and the `then`
    bytes that follow them."""
    a = bytes([(i * 7 + k) & 0xFF for k in range(41)])
    b = bytes([0x17]) + bytes([(i * 13 + k * 3) & 0xFF for k in range(62)])
    return a, b, _tail(then)[i % 251:i % 251 + then]


_TAILS = {}


def _tail(then):
    """Bytes that differ at every offset (no 8-byte piece repeats), `then` + 251 of them."""
    if then not in _TAILS:
        _TAILS[then] = bytes([(k * 11 + (k >> 8) * 7 + (k >> 16)) & 0xFF
                              for k in range(then + 251)])
    return _TAILS[then]


def where_from(got, want):
    """For each 8-byte piece of `got`, the offset in `want` it equals (None: nowhere)."""
    found = ((at, want.find(got[at:at + 8])) for at in range(0, len(got) - 7, 8))
    return [(at, i if i >= 0 else None) for at, i in found]


async def read_at_least(loop, s, n, have=b""):
    while len(have) < n:
        d = await loop.sock_recv(s, 65536)
        if not d:
            break
        have += d
    return have


async def serve(port, lowat, wait_ms, then):
    loop = asyncio.get_running_loop()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((SERVER, port))
    ls.listen(16384)
    ls.setblocking(False)
    # Only findings and the first errors are printed: nobody reads the pipe until the end.
    errors = [0]

    async def handle(s):
        try:
            got = await read_at_least(loop, s, 80)
            if len(got) < 80:
                return
            i = int.from_bytes(got[78:80], "big")
            await loop.sock_sendall(s, ANSWER)
            if lowat:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1 << 20)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
            if wait_ms:
                await asyncio.sleep(wait_ms / 1000)
            n = 104 + then
            rest = await read_at_least(loop, s, n, got[80:])
            a, b, c = upload(i, then)
            ok = rest[:n] == a + b + c
            if not ok:
                bad = next(k for k in range(n) if k >= len(rest) or rest[k] != (a + b + c)[k])
                print(json.dumps({"misplaced": i, "first_wrong_byte": bad,
                                  "got": rest[:bad + 128].hex(), "sent": (a + b + c)[:bad + 128].hex(),
                                  "pieces_from": where_from(rest[bad & ~7:bad + 128],
                                                            a + b + c)}), flush=True)
            await loop.sock_sendall(s, b"K" if ok else b"X")
        except OSError as e:
            errors[0] += 1
            if errors[0] <= 20:
                print(json.dumps({"error": str(e)}), flush=True)
        finally:
            s.close()

    print("listening", flush=True)
    while True:
        s, _ = await loop.sock_accept(ls)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        asyncio.ensure_future(handle(s))


async def connect(loop, s, addr):
    # asyncio's sock_connect resolves with the socket's protocol, which getaddrinfo refuses
    # for IPPROTO_MPTCP: connect by hand.
    rc = s.connect_ex(addr)
    if rc == 0:
        return
    if rc != errno.EINPROGRESS:
        raise OSError(rc, os.strerror(rc))
    ready = loop.create_future()
    loop.add_writer(s.fileno(), lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_writer(s.fileno())
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, os.strerror(err))


async def clients(port, conns, timeout, one_send, wait_ms, then, bundle):
    loop = asyncio.get_running_loop()
    tally = {"intact": 0, "misplaced": 0, "errors": 0}

    async def one(i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await connect(loop, s, (SERVER, port))
            await loop.sock_sendall(s, HELLO + i.to_bytes(2, "big"))
            if len(await read_at_least(loop, s, 76)) < 76:
                raise OSError("the server closed before its answer")
            a, b, c = upload(i, then)
            if wait_ms:
                await asyncio.sleep(wait_ms / 1000)
            if bundle:
                await loop.sock_sendall(s, a + b + c)
            elif one_send:
                await loop.sock_sendall(s, a + b)
            else:
                await loop.sock_sendall(s, a)
                await loop.sock_sendall(s, b)
            if c and not bundle:
                await loop.sock_sendall(s, c)
            verdict = await loop.sock_recv(s, 1)
            tally["intact" if verdict == b"K" else "misplaced"] += 1
        except OSError:
            tally["errors"] += 1
        finally:
            s.close()

    await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(conns))), timeout)
    print(json.dumps(tally), flush=True)


def run(args):
    spec = importlib.util.spec_from_file_location(
        "k41", os.path.join(os.path.dirname(os.path.abspath(__file__)), "mptcp-41-repro.py"))
    k41 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(k41)
    ns = k41.setup(args.prefix, "kernel", False, True)
    me = os.path.abspath(__file__)
    server = None
    total = {"intact": 0, "misplaced": 0, "errors": 0}
    found = []
    try:
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns["s"], sys.executable, me, "server", "--port",
             str(args.port), "--wait", str(args.server_wait), "--then", str(args.then)]
            + (["--lowat"] if args.server_lowat else []), stdout=subprocess.PIPE, text=True)
        if server.stdout.readline().strip() != "listening":
            raise SystemExit("the server did not start")
        start = time.monotonic()
        for r in range(args.rounds):
            out = subprocess.run(
                ["ip", "netns", "exec", ns["c"], sys.executable, me, "client", "--port",
                 str(args.port), "--conns", str(args.conns), "--wait", str(args.client_wait),
                 "--then", str(args.then)]
                + (["--one-send"] if args.one_send else [])
                + (["--bundle"] if args.bundle else []),
                capture_output=True, text=True, check=True).stdout
            t = json.loads(out.strip().splitlines()[-1])
            for k in total:
                total[k] += t[k]
            print(f"round {r}: {t['intact']} intact, {t['misplaced']} misplaced, "
                  f"{t['errors']} errors, {time.monotonic() - start:.0f} s", flush=True)
    finally:
        if server:
            server.kill()
            for line in server.stdout:
                if line.startswith("{"):
                    found.append(json.loads(line))
        k41.teardown(args.prefix)
    variant = {"one_send": args.one_send, "then": args.then, "bundle": args.bundle,
               "client_wait_ms": args.client_wait,
               "server_lowat": args.server_lowat, "server_wait_ms": args.server_wait}
    print(json.dumps({"kernel": os.uname().release, "variant": variant, "rounds": args.rounds,
                      "connections": args.rounds * args.conns, **total,
                      "server_saw": found}, indent=1))
    return 3 if total["misplaced"] or any("misplaced" in f for f in found) else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--prefix", default="k41s")
    r.add_argument("--rounds", type=int, default=15)
    r.add_argument("--conns", type=int, default=6500)
    r.add_argument("--port", type=int, default=7000)
    r.add_argument("--one-send", action="store_true")
    r.add_argument("--client-wait", type=float, default=0, metavar="MS")
    r.add_argument("--server-lowat", action="store_true")
    r.add_argument("--server-wait", type=float, default=0, metavar="MS")
    r.add_argument("--then", type=int, default=0, metavar="BYTES")
    r.add_argument("--bundle", action="store_true")
    s = sub.add_parser("server")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--lowat", action="store_true")
    s.add_argument("--wait", type=float, default=0)
    s.add_argument("--then", type=int, default=0)
    c = sub.add_parser("client")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--conns", type=int, required=True)
    c.add_argument("--timeout", type=float, default=120)
    c.add_argument("--one-send", action="store_true")
    c.add_argument("--wait", type=float, default=0)
    c.add_argument("--then", type=int, default=0)
    c.add_argument("--bundle", action="store_true")
    a = p.parse_args()
    if a.cmd == "run" and a.conns > 65536:
        p.error("--conns is at most 65536 (the connection's number is two bytes)")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if a.cmd == "run":
        sys.exit(run(a))
    if a.cmd == "server":
        asyncio.run(serve(a.port, a.lowat, a.wait, a.then))
    else:
        asyncio.run(clients(a.port, a.conns, a.timeout, a.one_send, a.wait, a.then, a.bundle))


if __name__ == "__main__":
    main()
