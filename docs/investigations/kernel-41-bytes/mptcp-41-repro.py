#!/usr/bin/env python3
"""Reproduce nena's "41-byte placement" with plain MPTCP sockets: no nena code anywhere.

Builds three network namespaces like nena's lab (client with a trusted and an untrusted
veth link to a router, router to server; addresses in 198.18.0.0/15 only), then runs rounds
of N concurrent MPTCP connections that follow nena's pattern byte for byte in size and order:

  client (bound to the trusted address 198.18.1.2)   server (198.18.3.2)
    -> 146 B  ("hello")
                                                      <- 76 B ("answer")
    [userspace PM: SUBFLOW_CREATE from 198.18.2.2;
     in-kernel PM: the kernel's `subflow` endpoint opens the join by itself once the
     connection is fully established, as in nena's lab]
    -> 41 B   ("key confirmation", its own send())
    -> 16,403 B ("record 0", its own send())
                                                      <- 16,403 B, then FIN
    FIN ->

Every byte the client sends is a pseudo-random function of (connection seed, stream offset)
and the seed travels in the first 8 bytes, so the server checks every byte and, on any
difference, measures exactly where the bytes it got came from: each misplaced run is
reported as {"at": offset where it was delivered, "from": offset it was sent at, "len"}.
The client checks the server's bytes the same way.

Per round: a capture on the SERVER's interface (tcpdump, snaplen 200) kept only when the
round saw a misplacement; MPTcpExt counters (`nstat -asz`) of both ends before and after
the whole run. Variants: --checksum (net.mptcp.checksum_enabled=1 on both ends),
--no-offload (ethtool -K gro off gso off tso off on every interface), --pm userspace,
--force-join (record 0 on the joined subflow in every connection), --delay-confirm RATE (the
41 B held back on the trusted link by tc, so record 0 arrives first). Results and the reason
for each variant: docs/investigations/kernel-41-bytes/README.md.

    sudo docs/investigations/kernel-41-bytes/mptcp-41-repro.py run --rounds 100 --conns 1000 --out /tmp/k41

Bounded: --rounds, --max-seconds. The namespaces are removed at the end, also on failure.
Needs: root, ip, ethtool, tcpdump, nstat. Exit status 0 when no byte was misplaced, 3 when
some were (the report says which), 1 on a setup error.
"""

import argparse
import asyncio
import errno
import json
import os
import random
import resource
import signal
import socket
import struct
import subprocess
import sys
import time

IPPROTO_MPTCP = 262
SOL_MPTCP = 284
MPTCP_INFO = 1

TRUSTED, UNTRUSTED, SERVER = "198.18.1.2", "198.18.2.2", "198.18.3.2"
HELLO, ANSWER, CONFIRM, RECORD0 = 146, 76, 41, 16403
UP_LEN = HELLO + CONFIRM + RECORD0
DOWN_LEN = ANSWER + RECORD0


def up_stream(seed):
    """The client's bytes of connection `seed`: the seed, then a function of the offset."""
    return seed.to_bytes(8, "big") + random.Random(seed).randbytes(UP_LEN - 8)


def down_stream(seed):
    return random.Random(seed ^ 0x5EED_D0E5_0000_0000).randbytes(DOWN_LEN)


def misplacements(got, exp, base):
    """Runs of `got` (stream offsets base..) that differ from `exp`, each located in `exp`."""
    want = exp[base : base + len(got)]
    if got == want:
        return []
    out, p = [], 0
    while p < len(got):
        if p < len(want) and got[p] == want[p]:
            p += 1
            continue
        window = got[p : p + 16]
        src = exp.find(window)
        if src < 0:
            out.append({"at": base + p, "from": None, "len": 1})
            p += 1
            continue
        k = 0
        while p + k < len(got) and src + k < len(exp) and got[p + k] == exp[src + k]:
            if base + p + k == src + k and k >= 16:
                break  # back in place
            k += 1
        out.append({"at": base + p, "from": src, "len": k, "shift": src - (base + p)})
        p += k
    # Merge single-byte foreign runs.
    merged = []
    for r in out:
        if merged and r["from"] is None and merged[-1]["from"] is None and \
                merged[-1]["at"] + merged[-1]["len"] == r["at"]:
            merged[-1]["len"] += 1
        else:
            merged.append(r)
    return merged


async def recv_exact(loop, s, n, timeout):
    buf = bytearray()
    deadline = loop.time() + timeout
    while len(buf) < n:
        left = deadline - loop.time()
        if left <= 0:
            raise TimeoutError(f"got {len(buf)} of {n} bytes")
        chunk = await asyncio.wait_for(loop.sock_recv(s, n - len(buf)), left)
        if not chunk:
            raise ConnectionError(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


async def recv_to_eof(loop, s, timeout):
    buf = bytearray()
    deadline = loop.time() + timeout
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise TimeoutError(f"no EOF after {len(buf)} bytes")
        chunk = await asyncio.wait_for(loop.sock_recv(s, 65536), left)
        if not chunk:
            return bytes(buf)
        buf += chunk


async def connect(loop, s, addr, timeout):
    """Non-blocking connect (asyncio's sock_connect resolves with proto 262 and fails)."""
    err = s.connect_ex(addr)
    if err not in (0, errno.EINPROGRESS):
        raise OSError(err, os.strerror(err))
    if err:
        fut = loop.create_future()
        loop.add_writer(s.fileno(), lambda: fut.done() or fut.set_result(None))
        try:
            await asyncio.wait_for(fut, timeout)
        finally:
            loop.remove_writer(s.fileno())
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, os.strerror(err))


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- server (in its namespace)

async def serve(port, timeout, like_nena=False):
    raise_nofile()
    loop = asyncio.get_running_loop()
    if like_nena:
        # nena's proxy server connects to its target (here a listener that takes the
        # connection and holds it) between its answer and its first read of the session.
        async def hold(r, w):
            await r.read()
            w.close()
        target = await asyncio.start_server(hold, "127.0.0.1", port + 1, backlog=4096)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((SERVER, port))
    ls.listen(4096)
    ls.setblocking(False)
    emit({"event": "listening", "port": port})

    async def handle(c, peer):
        seed = None
        try:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if like_nena:
                c.getsockopt(SOL_MPTCP, MPTCP_INFO, 96)  # nena's fallback check at accept
            hello = await recv_exact(loop, c, HELLO, timeout)
            seed = int.from_bytes(hello[:8], "big")
            up = up_stream(seed)
            bad = misplacements(hello, up, 0)
            down = down_stream(seed)
            await loop.sock_sendall(c, down[:ANSWER])
            tw = None
            if like_nena:
                _, tw = await asyncio.open_connection("127.0.0.1", port + 1)
                buf = bytearray()  # reads of up to 64 KiB, as nena's reader
                while len(buf) < CONFIRM + RECORD0:
                    chunk = await asyncio.wait_for(loop.sock_recv(c, 65536), timeout)
                    if not chunk:
                        raise ConnectionError(f"EOF after {len(buf)} bytes")
                    buf += chunk
                rest = bytes(buf)
            else:
                rest = await recv_exact(loop, c, CONFIRM + RECORD0, timeout)
            if tw is not None:
                tw.close()
            bad += misplacements(rest, up, HELLO)
            if bad:
                emit({"event": "misplaced", "dir": "client->server", "seed": seed,
                      "peer": f"{peer[0]}:{peer[1]}", "t": time.time(), "runs": bad})
            await loop.sock_sendall(c, down[ANSWER:])
            c.shutdown(socket.SHUT_WR)
            tail = await recv_to_eof(loop, c, timeout)
            if tail:
                emit({"event": "error", "seed": seed, "peer": f"{peer[0]}:{peer[1]}",
                      "error": f"{len(tail)} bytes past the end"})
        except Exception as e:  # noqa: BLE001 - reported, the server goes on
            emit({"event": "error", "seed": seed, "peer": f"{peer[0]}:{peer[1]}",
                  "error": f"{type(e).__name__}: {e}"})
        finally:
            c.close()

    while True:
        c, peer = await loop.sock_accept(ls)
        c.setblocking(False)
        asyncio.ensure_future(handle(c, peer))


def serve_threads(port, timeout, hold_lock=False):
    """The server as one blocking thread per connection (recv with MSG_WAITALL), so that the
    application sits in recvmsg on many connections while their data arrives. With
    `hold_lock`, a second thread per connection calls setsockopt(TCP_NODELAY) in a loop from
    the answer until the whole upload is read: each call owns the connection's socket lock
    (lock_sock), so the join's third ACK and its first data often arrive while the lock is
    owned, as when a busy server thread is preempted inside a socket call."""
    import threading
    raise_nofile()
    threading.stack_size(256 * 1024)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((SERVER, port))
    ls.listen(4096)
    lock = threading.Lock()

    def say(obj):
        with lock:
            emit(obj)

    def exact(c, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = c.recv(n - len(buf), socket.MSG_WAITALL)
            if not chunk:
                raise ConnectionError(f"EOF after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def handle(c, peer):
        seed = None
        try:
            c.settimeout(timeout)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = exact(c, HELLO)
            seed = int.from_bytes(hello[:8], "big")
            up, down = up_stream(seed), down_stream(seed)
            bad = misplacements(hello, up, 0)
            c.sendall(down[:ANSWER])
            done = threading.Event()
            if hold_lock:
                def locker():
                    while not done.is_set():
                        try:
                            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        except OSError:
                            return
                threading.Thread(target=locker, daemon=True).start()
            try:
                rest = exact(c, CONFIRM + RECORD0)
            finally:
                done.set()
            bad += misplacements(rest, up, HELLO)
            if bad:
                say({"event": "misplaced", "dir": "client->server", "seed": seed,
                     "peer": f"{peer[0]}:{peer[1]}", "t": time.time(), "runs": bad})
            c.sendall(down[ANSWER:])
            c.shutdown(socket.SHUT_WR)
            while c.recv(65536):
                pass
        except Exception as e:  # noqa: BLE001 - reported, the server goes on
            say({"event": "error", "seed": seed, "peer": f"{peer[0]}:{peer[1]}",
                 "error": f"{type(e).__name__}: {e}"})
        finally:
            c.close()

    emit({"event": "listening", "port": port})
    while True:
        c, peer = ls.accept()
        threading.Thread(target=handle, args=(c, peer), daemon=True).start()


# ---------------------------------------------------------------- client (in its namespace)

class Genl:
    """Just enough generic netlink for mptcp_pm SUBFLOW_CREATE."""

    def __init__(self):
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)  # NETLINK_GENERIC
        self.s.bind((0, 0))
        self.seq = 0
        attrs = self.nla(2, b"mptcp_pm\0")  # CTRL_ATTR_FAMILY_NAME
        msgs = self.request(0x10, 3, 2, attrs)  # GENL_ID_CTRL, CTRL_CMD_GETFAMILY
        self.family = None
        for m in msgs:
            for t, v in self.parse(m[20:]):
                if t == 1:  # CTRL_ATTR_FAMILY_ID
                    self.family = struct.unpack("H", v[:2])[0]
        if self.family is None:
            raise OSError("no mptcp_pm generic netlink family")

    @staticmethod
    def nla(t, v):
        n = 4 + len(v)
        return struct.pack("HH", n, t) + v + b"\0" * ((4 - n % 4) % 4)

    @staticmethod
    def parse(b):
        out, p = [], 0
        while p + 4 <= len(b):
            n, t = struct.unpack("HH", b[p : p + 4])
            if n < 4:
                break
            out.append((t & 0x3FFF, b[p + 4 : p + n]))
            p += (n + 3) & ~3
        return out

    def request(self, typ, cmd, version, attrs):
        self.seq += 1
        body = struct.pack("BBH", cmd, version, 0) + attrs
        self.s.send(struct.pack("IHHII", 16 + len(body), typ, 1 | 4, self.seq, 0) + body)
        replies = []
        while True:
            data = self.s.recv(65536)
            p = 0
            while p + 16 <= len(data):
                n, mtype, _flags, seq, _pid = struct.unpack("IHHII", data[p : p + 16])
                msg = data[p : p + n]
                p += (n + 3) & ~3
                if seq != self.seq:
                    continue
                if mtype == 2:  # NLMSG_ERROR (0: the ACK)
                    err = struct.unpack("i", msg[16:20])[0]
                    if err:
                        raise OSError(-err, os.strerror(-err))
                    return replies
                replies.append(msg)

    def subflow_create(self, token, local, remote, port):
        def addr(a, port=0, flags=0):
            v = self.nla(1, struct.pack("H", socket.AF_INET)) + self.nla(3, socket.inet_aton(a))
            if port:
                v += self.nla(5, struct.pack("H", port))
            if flags:
                v += self.nla(6, struct.pack("I", flags))
            return v
        attrs = (self.nla(4, struct.pack("I", token))
                 + self.nla(1 | 0x8000, addr(local, flags=2))       # ADDR, FLAG_SUBFLOW
                 + self.nla(6 | 0x8000, addr(remote, port=port)))   # ADDR_REMOTE
        self.request(self.family, 10, 1, attrs)  # MPTCP_PM_CMD_SUBFLOW_CREATE

    def set_backup(self, token, local, lport, remote, rport):
        """MPTCP_PM_CMD_SET_FLAGS: mark the subflow local:lport -> remote:rport as backup."""
        def addr(a, port, flags=None):
            v = (self.nla(1, struct.pack("H", socket.AF_INET)) + self.nla(3, socket.inet_aton(a))
                 + self.nla(5, struct.pack("H", port)))
            if flags is not None:
                v += self.nla(6, struct.pack("I", flags))
            return v
        attrs = (self.nla(4, struct.pack("I", token))
                 + self.nla(1 | 0x8000, addr(local, lport, 4))      # FLAG_BACKUP
                 + self.nla(6 | 0x8000, addr(remote, rport)))
        self.request(self.family, 7, 1, attrs)


async def client_round(args):
    raise_nofile()
    loop = asyncio.get_running_loop()
    genl = Genl() if args.pm == "userspace" else None
    results = {"ok": 0, "misplaced": [], "errors": []}
    start = asyncio.Event()
    base = args.round << 20

    async def session(i):
        seed = base | i
        up, down = up_stream(seed), down_stream(seed)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
        s.setblocking(False)
        try:
            s.bind((TRUSTED, 0))
            await start.wait()
            await connect(loop, s, (SERVER, args.port), args.timeout)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_sendall(s, up[:HELLO])
            answer = await recv_exact(loop, s, ANSWER, args.timeout)
            if genl is not None:
                info = s.getsockopt(SOL_MPTCP, MPTCP_INFO, 96)
                token = struct.unpack_from("I", info, 12)[0]
                genl.subflow_create(token, UNTRUSTED, SERVER, args.port)
            if args.wait_join:
                # The failing sessions had record 0 on the joined subflow: wait until the
                # join is part of the connection, so that the scheduler can pick it.
                for _ in range(2000):
                    if s.getsockopt(SOL_MPTCP, MPTCP_INFO, 96)[0] >= 1:
                        break
                    await asyncio.sleep(0.001)
                else:
                    raise TimeoutError("the join did not come up within 2 s")
            await loop.sock_sendall(s, up[HELLO : HELLO + CONFIRM])
            if args.force_join:
                # Record 0 on the joined subflow, as in the failing nena sessions: the first
                # subflow becomes a backup (MP_PRIO) once the 41 B are queued on it.
                lport = s.getsockname()[1]
                genl.set_backup(token, TRUSTED, lport, SERVER, args.port)
            if args.gap_us:
                # nena's proxy writes record 0 about 0.6 ms after the confirmation (measured
                # in a server-side capture of its 1,000-session test): the confirmation is
                # still unacknowledged on the first subflow, and the scheduler sends record
                # 0 on the joined one in about half of the sessions.
                await asyncio.sleep(args.gap_us / 1e6)
            await loop.sock_sendall(s, up[HELLO + CONFIRM :])
            back = await recv_to_eof(loop, s, args.timeout)
            bad = misplacements(answer + back, down, 0)
            if len(answer + back) != DOWN_LEN:
                results["errors"].append(f"{seed}: {len(answer + back)} bytes back")
            if bad:
                results["misplaced"].append({"dir": "server->client", "seed": seed,
                                             "local": "%s:%d" % s.getsockname(), "runs": bad})
            else:
                results["ok"] += 1
        except Exception as e:  # noqa: BLE001 - counted and reported
            results["errors"].append(f"{seed}: {type(e).__name__}: {e}")
        finally:
            s.close()

    tasks = [asyncio.ensure_future(session(i)) for i in range(args.conns)]
    await asyncio.sleep(0)
    start.set()
    await asyncio.gather(*tasks)
    emit(results)


# ---------------------------------------------------------------- orchestration (root ns)

def sh(*cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def netns(p):
    return {"c": f"{p}-client", "r": f"{p}-router", "s": f"{p}-server"}


def teardown(p):
    for ns in netns(p).values():
        sh("ip", "netns", "del", ns, check=False)


def setup(p, pm, checksum, offload, delay_confirm=None, confirm_ip_len=121):
    n = netns(p)
    teardown(p)
    for ns in n.values():
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    links = [("trusted", n["c"], "198.18.1.2", "trusted", "198.18.1.1"),
             ("untrusted", n["c"], "198.18.2.2", "untrusted", "198.18.2.1"),
             ("eth0", n["s"], "198.18.3.2", "server", "198.18.3.1")]
    for edge, ens, eaddr, rname, raddr in links:
        sh("ip", "link", "add", edge, "netns", ens, "type", "veth", "peer", "name", rname,
           "netns", n["r"])
        sh("ip", "-n", ens, "addr", "add", eaddr + "/24", "dev", edge)
        sh("ip", "-n", n["r"], "addr", "add", raddr + "/24", "dev", rname)
        sh("ip", "-n", ens, "link", "set", edge, "up")
        sh("ip", "-n", n["r"], "link", "set", rname, "up")
        if not offload:
            for ns, dev in ((ens, edge), (n["r"], rname)):
                sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "off", "gso", "off",
                   "tso", "off")
    sh("ip", "netns", "exec", n["r"], "sysctl", "-qw", "net.ipv4.ip_forward=1")
    for ns in (n["c"], n["r"]):
        for k in ("all", "default"):
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv4.conf.{k}.rp_filter=0")
    c = n["c"]
    for dev in ("trusted", "untrusted"):
        sh("ip", "netns", "exec", c, "sysctl", "-qw", f"net.ipv4.conf.{dev}.rp_filter=0")
    sh("ip", "-n", c, "route", "add", "default", "via", "198.18.1.1", "dev", "trusted")
    for table, addr, gw, dev in ((101, TRUSTED, "198.18.1.1", "trusted"),
                                 (102, UNTRUSTED, "198.18.2.1", "untrusted")):
        sh("ip", "-n", c, "route", "add", "default", "via", gw, "dev", dev, "table", str(table))
        sh("ip", "-n", c, "rule", "add", "from", addr, "table", str(table))
    sh("ip", "-n", n["s"], "route", "add", "default", "via", "198.18.3.1")
    for ns in (n["c"], n["s"]):
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.mptcp.enabled=1")
        sh("ip", "netns", "exec", ns, "sysctl", "-qw",
           f"net.mptcp.checksum_enabled={1 if checksum else 0}")
        sh("ip", "-n", ns, "mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "2")
    if delay_confirm:
        # The 41-byte packets leaving by the trusted link (IP total length 121 with this
        # kernel's options: 20 + 60 + 41) go through an ifb whose tbf queues them, so that
        # record 0 on the joined subflow reaches the server before the bytes in front of it
        # (in the failing nena sessions the server's data ACK stayed at D while record 0
        # arrived). tc only: no program touches the packets.
        sh("ip", "-n", c, "link", "add", "ifb41", "type", "ifb")
        sh("ip", "-n", c, "link", "set", "ifb41", "up")
        sh("tc", "-n", c, "qdisc", "add", "dev", "ifb41", "root", "tbf", "rate", delay_confirm,
           "burst", "200", "limit", "1000000")
        sh("tc", "-n", c, "qdisc", "add", "dev", "trusted", "clsact")
        sh("tc", "-n", c, "filter", "add", "dev", "trusted", "egress", "protocol", "ip", "u32",
           "match", "u16", str(confirm_ip_len), "0xffff", "at", "2",
           "action", "mirred", "egress", "redirect", "dev", "ifb41")
    if pm == "userspace":
        sh("ip", "netns", "exec", c, "sysctl", "-qw", "net.mptcp.pm_type=1")
    else:
        sh("ip", "-n", c, "mptcp", "endpoint", "add", UNTRUSTED, "dev", "untrusted", "subflow")
    return n


def mptcp_counters(ns):
    out = sh("ip", "netns", "exec", ns, "nstat", "-asz")
    vals = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0].startswith("MPTcpExt"):
            vals[f[0]] = int(f[1])
    return vals


def delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] != before.get(k, 0)}


def start_capture(ns, path, seconds):
    p = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", "eth0", "-s", "200",
                          "-U", "-n", "-w", path, "tcp"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + seconds
    line = p.stderr.readline()  # "listening on eth0, ..." once the capture runs
    if "listening on" not in line or time.time() > deadline:
        p.kill()
        raise RuntimeError(f"tcpdump did not start: {line.strip()}")
    return p


def stop_capture(p):
    p.send_signal(signal.SIGINT)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run(args):
    me = os.path.abspath(__file__)
    os.makedirs(args.out, exist_ok=True)
    p = args.prefix
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = {"kernel": os.uname().release, "pm": args.pm, "checksum": args.checksum,
              "wait_join": args.wait_join, "gap_us": args.gap_us,
              "force_join": args.force_join, "delay_confirm": args.delay_confirm,
              "server_threads": args.server_threads, "hold_lock": args.hold_lock,
              "server_like_nena": args.server_like_nena,
              "offload": not args.no_offload, "conns": args.conns, "rounds": 0,
              "sessions": 0, "ok": 0, "misplaced": [], "errors": 0, "error_samples": [],
              "captures": []}
    server = None
    cap = None
    try:
        n = setup(p, args.pm, args.checksum, not args.no_offload, args.delay_confirm,
                  args.confirm_ip_len)
        before = {h: mptcp_counters(n[h]) for h in ("c", "s")}
        server = subprocess.Popen(["ip", "netns", "exec", n["s"], sys.executable, me, "server",
                                   "--port", str(args.port), "--timeout", str(args.timeout)]
                                  + (["--threads"] if args.server_threads else [])
                                  + (["--hold-lock"] if args.hold_lock else [])
                                  + (["--like-nena"] if args.server_like_nena else []),
                                  stdout=subprocess.PIPE, text=True)
        first = json.loads(server.stdout.readline())
        assert first["event"] == "listening", first
        server_events = []

        def drain():
            for line in server.stdout:
                server_events.append(json.loads(line))
        import threading
        threading.Thread(target=drain, daemon=True).start()
        t0 = time.time()
        for r in range(args.rounds):
            if time.time() - t0 > args.max_seconds:
                break
            pcap = os.path.join(args.out, f"server-round{r}.pcap")
            cap = start_capture(n["s"], pcap, 10) if not args.no_capture else None
            seen = len(server_events)
            res = subprocess.run(["ip", "netns", "exec", n["c"], sys.executable, me, "client",
                                  "--round", str(r), "--conns", str(args.conns), "--pm", args.pm,
                                  "--port", str(args.port), "--timeout", str(args.timeout)]
                                 + (["--wait-join"] if args.wait_join else [])
                                 + ["--gap-us", str(args.gap_us)]
                                 + (["--force-join"] if args.force_join else []),
                                 capture_output=True, text=True)
            if res.returncode != 0:
                raise RuntimeError(f"client round {r} failed: {res.stderr[-2000:]}")
            cr = json.loads(res.stdout.strip().splitlines()[-1])
            # The server's last events of this round arrive with the clients' FINs: all
            # clients are done, so every server handler has reported or is closing.
            if cap:
                stop_capture(cap)
                cap = None
            new = [e for e in server_events[seen:] if e["event"] != "listening"]
            mis = [dict(e, round=r) for e in new if e["event"] == "misplaced"]
            mis += [dict(m, round=r) for m in cr["misplaced"]]
            errs = [e for e in new if e["event"] == "error"]
            report["rounds"] += 1
            report["sessions"] += args.conns
            report["ok"] += cr["ok"]
            report["misplaced"] += mis
            report["errors"] += len(cr["errors"]) + len(errs)
            report["error_samples"] = (report["error_samples"] + cr["errors"][:3]
                                       + [e["error"] for e in errs[:3]])[:20]
            if not args.no_capture and (mis or errs or cr["errors"] or args.keep_captures):
                report["captures"].append(pcap)
            elif not args.no_capture:
                os.unlink(pcap)
            print(f"round {r}: {cr['ok']}/{args.conns} ok, {len(mis)} misplaced, "
                  f"{len(cr['errors']) + len(errs)} errors, {time.time() - t0:.0f} s",
                  file=sys.stderr, flush=True)
        after = {h: mptcp_counters(n[h]) for h in ("c", "s")}
        report["mptcpext_delta"] = {"client": delta(before["c"], after["c"]),
                                    "server": delta(before["s"], after["s"])}
        report["seconds"] = round(time.time() - t0, 1)
    finally:
        if cap is not None:
            stop_capture(cap)  # a process left in a namespace would keep it alive
        if server is not None:
            server.kill()
            server.wait()
        teardown(p)
        with open(os.path.join(args.out, "report.json"), "w") as f:
            json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))
    return 3 if report["misplaced"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="build namespaces, run rounds, report, tear down")
    r.add_argument("--prefix", default="k41")
    r.add_argument("--rounds", type=int, default=10)
    r.add_argument("--conns", type=int, default=1000)
    r.add_argument("--pm", choices=["kernel", "userspace"], default="kernel")
    r.add_argument("--checksum", action="store_true")
    r.add_argument("--no-offload", action="store_true")
    r.add_argument("--no-capture", action="store_true")
    r.add_argument("--wait-join", action="store_true",
                   help="send the 41 B only once the joined subflow is up (record 0 then "
                        "often travels on it, as in the failing nena sessions)")
    r.add_argument("--force-join", action="store_true",
                   help="userspace PM: after the 41 B, mark the first subflow backup so "
                        "that record 0 travels on the joined subflow (implies --wait-join)")
    r.add_argument("--delay-confirm", metavar="RATE",
                   help="queue the 41-byte packets on the trusted link behind a tbf of this "
                        "rate (ifb + u32 + mirred), so record 0 arrives first")
    r.add_argument("--confirm-ip-len", type=int, default=121,
                   help="IP total length of a 41-byte packet (121 here; 125 with checksums)")
    r.add_argument("--server-threads", action="store_true",
                   help="server: one blocking thread per connection (recv MSG_WAITALL) "
                        "instead of one asyncio loop")
    r.add_argument("--hold-lock", action="store_true",
                   help="(with --server-threads) a thread per connection keeps calling "
                        "setsockopt(TCP_NODELAY) from the answer until the upload is read, "
                        "so the socket lock is often owned when the join comes up")
    r.add_argument("--server-like-nena", action="store_true",
                   help="server: MPTCP_INFO read at accept, a TCP connect to a local target "
                        "between the answer and the first read, reads of up to 64 KiB")
    r.add_argument("--gap-us", type=int, default=0,
                   help="pause between the 41 B and record 0 (nena: about 600 us)")
    r.add_argument("--keep-captures", action="store_true",
                   help="keep every round's capture (default: only rounds with a finding)")
    r.add_argument("--max-seconds", type=float, default=1800)
    r.add_argument("--port", type=int, default=7000)
    r.add_argument("--timeout", type=float, default=30)
    r.add_argument("--out", default="/tmp/k41")
    s = sub.add_parser("server")
    s.add_argument("--threads", action="store_true")
    s.add_argument("--hold-lock", action="store_true")
    s.add_argument("--like-nena", action="store_true")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--timeout", type=float, default=30)
    c = sub.add_parser("client")
    c.add_argument("--round", type=int, required=True)
    c.add_argument("--conns", type=int, required=True)
    c.add_argument("--pm", choices=["kernel", "userspace"], required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--timeout", type=float, default=30)
    c.add_argument("--wait-join", action="store_true")
    c.add_argument("--gap-us", type=int, default=0)
    c.add_argument("--force-join", action="store_true")
    a = ap.parse_args()
    if getattr(a, "force_join", False):
        if a.pm != "userspace":
            ap.error("--force-join needs --pm userspace (SET_FLAGS is a userspace-PM command)")
        a.wait_join = True
    if a.cmd == "run":
        try:
            sys.exit(run(a))
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(1)
    elif a.cmd == "server":
        if a.threads:
            serve_threads(a.port, a.timeout, a.hold_lock)
        else:
            asyncio.run(serve(a.port, a.timeout, a.like_nena))
    else:
        asyncio.run(client_round(a))


if __name__ == "__main__":
    main()
