"""tcp_echo.py: a small TCP request/response latency test (for bridge-compare).

  tcp_echo.py server --listen=ADDR:PORT [--relay=HOST:PORT] [--max_time=SEC]
  tcp_echo.py client --connect=ADDR:PORT [--rounds=N] [--request=BYTES]
                     [--response=BYTES] [--warmup=N] [--max_time=SEC] [--cc=NAME]

The client opens one TCP connection (TCP_NODELAY), sends a 16-byte hello (magic, request
and response sizes), then N rounds, one at a time: a request of --request bytes (its
first 8 bytes the round number), then it waits for the whole response of --response
bytes (the round number echoed back) and times the round trip with a monotonic clock.
The first --warmup rounds (default 1: a proxy may open its far connection on the first
bytes) are reported apart and left out of the percentiles. Output, one JSON object:
  {"rounds", "requested_rounds", "warmup_rtt_ms", "rtt_ms": {min, p50, p90, p99, max,
   mean}, "connect_ms", "elapsed_s", "error"?}
Percentiles interpolate between order statistics (as transport/base's percentiles).

The server answers every connection that starts with the hello; with --relay it hands
any other connection to HOST:PORT (os.splice through a pipe, both ways), so one port can
carry the echo test and a bulk stream (iperf3) at once: a tunnel with a single target
(a bridge, kcptun) then carries both through the same path. Every wait is bounded:
the server exits after --max_time, the client after --max_time or a 30 s silent round.

Exit status: 0 all rounds done, 1 a failure (the JSON's "error" says which), 2 bad flags.
"""

import argparse
import json
import os
import select
import socket
import struct
import sys
import threading
import time

from longhaul_bench.stats import percentile

MAGIC = b"LHECHO1\0"
HELLO = struct.Struct("!8sII")  # magic, request bytes, response bytes
MAX_MSG = 1 << 20
ROUND_TIMEOUT_S = 30.0


def host_port(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not (0 < int(port) < 65536):
        raise argparse.ArgumentTypeError("'%s' is not ADDR:PORT" % text)
    return host, int(port)


def recv_exact(sock, n, deadline):
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no reply within the time bound")
        sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


# ---------------------------------------------------------------------------------------
# Server.

def serve_echo(conn, req, resp, end):
    while time.monotonic() < end:
        try:
            msg = recv_exact(conn, req, min(end, time.monotonic() + 3600))
        except (ConnectionError, TimeoutError, OSError):
            return
        out = msg[:8] + b"\0" * (resp - 8)
        conn.settimeout(max(0.1, end - time.monotonic()))
        conn.sendall(out)


def pump(src, dst, end):
    """src -> dst with splice(2) through a pipe until EOF, an error or `end`."""
    r, w = os.pipe()
    try:
        try:
            import fcntl
            fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: 1 MiB
        except OSError:
            pass
        sfd, dfd = src.fileno(), dst.fileno()
        while time.monotonic() < end:
            n = os.splice(sfd, w, 1 << 20)
            if n == 0:
                break
            while n > 0:
                n -= os.splice(r, dfd, n)
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    except OSError:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    finally:
        os.close(r)
        os.close(w)


def serve_relay(conn, relay, end):
    try:
        up = socket.create_connection(relay, timeout=10)
    except OSError:
        return
    up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(None)
    up.settimeout(None)
    t = threading.Thread(target=pump, args=(up, conn, end), daemon=True)
    t.start()
    pump(conn, up, end)
    t.join(max(0.1, end - time.monotonic()))
    up.close()


def handle(conn, relay, end):
    try:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Which protocol: peek (bounded) until the first bytes match or differ from MAGIC.
        head = b""
        peek_end = min(end, time.monotonic() + 30)
        while len(head) < len(MAGIC) and MAGIC.startswith(head):
            left = peek_end - time.monotonic()
            if left <= 0 or not select.select([conn], [], [], left)[0]:
                return
            more = conn.recv(len(MAGIC), socket.MSG_PEEK)
            if not more:
                return  # closed before saying anything
            if len(more) == len(head):
                time.sleep(0.001)  # a prefix of MAGIC so far: wait for the rest
            head = more
        if head == MAGIC:
            _, req, resp = HELLO.unpack(recv_exact(conn, HELLO.size, peek_end))
            if 8 <= req <= MAX_MSG and 8 <= resp <= MAX_MSG:
                serve_echo(conn, req, resp, end)
        elif relay:
            serve_relay(conn, relay, end)
    except OSError:
        pass
    finally:
        conn.close()


def server(args):
    end = time.monotonic() + args.max_time
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(args.listen)
    ls.listen(256)
    print("listening on %s:%d" % args.listen, flush=True)
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return 0
        ls.settimeout(min(left, 1.0))
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=handle, args=(conn, args.relay, end), daemon=True).start()


# ---------------------------------------------------------------------------------------
# Client.

def client(args):
    out = {"requested_rounds": args.rounds, "warmup": args.warmup, "request_bytes":
           args.request, "response_bytes": args.response, "rounds": 0}
    end = time.monotonic() + args.max_time
    rtts, warm = [], []
    t0 = time.monotonic()
    rc = 0
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if args.cc:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.cc.encode())
        s.settimeout(min(30.0, args.max_time))
        c0 = time.monotonic()
        s.connect(args.connect)
        out["connect_ms"] = round((time.monotonic() - c0) * 1e3, 3)
        s.sendall(HELLO.pack(MAGIC, args.request, args.response))
        pad = b"\0" * (args.request - 8)
        for i in range(args.warmup + args.rounds):
            now = time.monotonic()
            if now >= end:
                raise TimeoutError("--max_time reached after %d rounds" % len(rtts))
            s.settimeout(max(0.001, end - now))
            t = time.monotonic()
            s.sendall(struct.pack("!Q", i) + pad)
            reply = recv_exact(s, args.response, min(end, t + ROUND_TIMEOUT_S))
            dt = time.monotonic() - t
            if struct.unpack("!Q", reply[:8])[0] != i:
                raise ValueError("round %d: the reply carries round %d" %
                                 (i, struct.unpack("!Q", reply[:8])[0]))
            (warm if i < args.warmup else rtts).append(dt * 1e3)
        s.close()
    except (OSError, TimeoutError, ValueError, ConnectionError) as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
        rc = 1
    out["rounds"] = len(rtts)
    out["warmup_rtt_ms"] = [round(x, 3) for x in warm]
    v = sorted(rtts)
    if v:
        out["rtt_ms"] = {"min": round(v[0], 3), "p50": round(percentile(v, 0.5), 3),
                         "p90": round(percentile(v, 0.9), 3),
                         "p99": round(percentile(v, 0.99), 3), "max": round(v[-1], 3),
                         "mean": round(sum(v) / len(v), 3)}
    out["elapsed_s"] = round(time.monotonic() - t0, 3)
    print(json.dumps(out), flush=True)
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--listen", type=host_port, required=True)
    s.add_argument("--relay", type=host_port, default=None,
                   help="hand connections that are not echo tests to HOST:PORT")
    s.add_argument("--max_time", type=float, default=600.0)
    c = sub.add_parser("client")
    c.add_argument("--connect", type=host_port, required=True)
    c.add_argument("--rounds", type=int, default=200)
    c.add_argument("--warmup", type=int, default=1)
    c.add_argument("--request", type=int, default=100)
    c.add_argument("--response", type=int, default=100)
    c.add_argument("--max_time", type=float, default=120.0)
    c.add_argument("--cc", default="", help="TCP_CONGESTION for the client's socket")
    args = ap.parse_args()
    if args.role == "server":
        if args.max_time <= 0:
            ap.error("--max_time must be positive")
        return server(args)
    if not (1 <= args.rounds <= 1000000) or args.warmup < 0 or args.max_time <= 0:
        ap.error("--rounds must be 1..1000000, --warmup >= 0, --max_time > 0")
    if not (8 <= args.request <= MAX_MSG and 8 <= args.response <= MAX_MSG):
        ap.error("--request and --response must be 8..%d bytes" % MAX_MSG)
    return client(args)


def entry():
    """What tools/bench/tcp_echo.py runs."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
