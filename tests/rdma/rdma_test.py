#!/usr/bin/env python3
"""The rdma tier: longhaul over the verbs datapath between two soft-RoCE guests.

Boots the testbed (tools/testbed/longhaul_testbed.py) once, runs every case in it with
netem on both guests' eth0, and prints one line per case and a closing
'N passed, N failed' line. Exit status: 0 all passed, 1 a case failed, 77 (ctest's
SKIP_RETURN_CODE) when no testbed can be had here (qemu, the kernel package) or the
build has no verbs driver; the reason is printed.

    rdma_test.py --build_dir=build [--cases=bulk,reorder] [--keep]
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "testbed"))
import longhaul_testbed as lt  # noqa: E402

SERVER = "198.18.1.1"
DELAY = "delay 29ms limit 100000"  # each way: RTT 58 ms


class Case:
    """Every longhaul process of the tier runs protected (static keys; the NCCL ranks and
    verbs_peer a pre-shared key) unless a case asks for plaintext."""

    def __init__(self, tb, build, keys, tmp_share=None):
        self.tb = tb
        self.tmp_share = tmp_share  # a folder under /tmp the testbed was told to keep
        self.keys = keys.folder
        self.server_keys = keys.flags("ik", "server")
        self.client_keys = keys.flags("ik", "client")
        self.psk = keys.psk
        self.perf = os.path.join(build, "bin", "longhaul-perf")
        self.peer = os.path.join(build, "tests", "verbs_peer")
        self.rank = os.path.join(build, "tests", "nccl_verbs_rank")
        self.plugin = os.path.join(build, "lib", "libnccl-net-longhaul.so")
        self.probe = os.path.join(build, "bin", "longhaul-probe")
        self.uc_probe = os.path.join(build, "tests", "uc_probe")

    def netem(self, spec_both):
        self.tb.netem("a", spec_both)
        self.tb.netem("b", spec_both)

    def start_server(self, cmd, ready_text, log="/tmp/server.log"):
        """Starts `cmd` in guest a and waits (bounded) until its log shows `ready_text`."""
        pid = self.tb.spawn("a", cmd, log)
        rc, out = self.tb.run("a", "timeout 30 sh -c 'until grep -q \"%s\" %s; do sleep 0.05; done'"
                              % (ready_text, log), 40)
        if rc != 0:
            self.tb.kill("a", pid)
            _, text = self.tb.run("a", "cat " + log, 10)
            raise AssertionError("server did not start: " + text[-1500:])
        return pid

    def finish_server(self, pid, timeout=60, log="/tmp/server.log"):
        rc = self.tb.wait("a", pid, timeout)
        if rc is None:
            self.tb.kill("a", pid)
        _, text = self.tb.run("a", "cat " + log, 10)
        return rc, text

    def perf_pair(self, client_flags, server_flags="", timeout=180, server_keys=None,
                  client_keys=None):
        server_keys = self.server_keys if server_keys is None else server_keys
        client_keys = self.client_keys if client_keys is None else client_keys
        pid = self.start_server("%s --server --datapath=verbs --one_off --bind=%s %s %s"
                                % (self.perf, SERVER, server_keys, server_flags),
                                "Server listening")
        rc, out = self.tb.run("b", "%s --client=%s --datapath=verbs %s %s"
                              % (self.perf, SERVER, client_keys, client_flags), timeout)
        src, sout = self.finish_server(pid)
        return rc, out, src, sout


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def bulk(c, netem_extra, flags=""):
    c.netem(DELAY + netem_extra)
    rc, out, src, sout = c.perf_pair("--bytes=6MiB --rate=20mbit --interval=5 " + flags)
    expect(rc == 0 and "verified intact" in out, "client rc %s:\n%s" % (rc, out[-2000:]))
    expect(src == 0 and "payload intact" in sout, "server rc %s:\n%s" % (src, sout[-2000:]))
    expect("Noise IK (static keys)" in out, "not protected:\n" + out[-2000:])


def case_devices(c):
    for g in lt.GUESTS:
        rc, out = c.tb.run(g, "ibv_devinfo -d rxe0", 30)
        expect(rc == 0 and "PORT_ACTIVE" in out and "active_mtu:\t\t4096" in out,
               "guest %s: %s" % (g, out))


def case_bad_device(c):
    rc, out = c.tb.run("b", "%s --client=%s --datapath=verbs --device=nosuch --bytes=1MiB %s"
                       % (c.perf, SERVER, c.client_keys), 30)
    expect(rc != 0, "exit status 0 with --device=nosuch")
    expect("'nosuch' not found" in out and "present: rxe0" in out, out)
    rc, out = c.tb.run("b", "%s --server --datapath=verbs --device=rxe0 --gid_index=99 --port=5301 %s"
                       % (c.perf, c.server_keys), 30)
    expect(rc != 0 and "no GID index 99" in out, out)


def case_no_listener(c):
    c.netem("")
    rc, out = c.tb.run("b", "%s --client=%s --port=5999 --datapath=verbs --bytes=1MiB %s"
                       % (c.perf, SERVER, c.client_keys), 30)
    expect(rc != 0 and "connection refused" in out, out)


def case_wrong_key(c):
    """A client that holds the wrong key for the server is refused over verbs, and the
    server serves the next (right) client."""
    c.netem(DELAY)
    pid = c.start_server("%s --server --datapath=verbs --one_off --bind=%s %s"
                         % (c.perf, SERVER, c.server_keys), "Server listening")
    wrong = "--key=%s/client.key --peer_key=%s/client.pub" % (c.keys, c.keys)
    rc, out = c.tb.run("b", "%s --client=%s --datapath=verbs --bytes=1MiB --rate=20mbit %s"
                       % (c.perf, SERVER, wrong), 60)
    expect(rc != 0 and "refused the client's keys" in out, "rc %s:\n%s" % (rc, out[-2000:]))
    rc, out = c.tb.run("b", "%s --client=%s --datapath=verbs --bytes=1MiB --rate=20mbit %s"
                       % (c.perf, SERVER, c.client_keys), 60)
    src, sout = c.finish_server(pid)
    expect(rc == 0 and "verified intact" in out, "rc %s:\n%s" % (rc, out[-2000:]))
    expect(src == 0, "server rc %s:\n%s" % (src, sout[-2000:]))


def case_bulk_plaintext(c):
    """Plaintext, chosen explicitly, works over verbs too and says so."""
    c.netem(DELAY + " loss 0.1%")
    rc, out, src, sout = c.perf_pair("--bytes=6MiB --rate=20mbit --interval=5",
                                     server_keys="--insecure", client_keys="--insecure")
    expect(rc == 0 and "verified intact" in out, "client rc %s:\n%s" % (rc, out[-2000:]))
    expect("insecure (plaintext)" in out, out[-2000:])


def case_bulk_clean(c):
    bulk(c, "")


def case_bulk_loss_1e3(c):
    bulk(c, " loss 0.1%")


def case_bulk_loss_1e2(c):
    bulk(c, " loss 1%")


def case_bulk_reorder(c):
    bulk(c, " reorder 5% 50%")


def case_fec(c):
    c.netem(DELAY + " loss 1%")
    rc, out, src, sout = c.perf_pair("--bytes=6MiB --rate=20mbit --interval=5 --fec=16,4")
    expect(rc == 0 and "verified intact" in out, out[-2000:])
    expect("fec 16,4" in out or "FEC" in out, out[-2000:])


def case_reverse_and_parallel(c):
    c.netem(DELAY + " loss 0.1%")
    rc, out, src, sout = c.perf_pair("--bytes=3MiB --rate=10mbit --interval=5 --parallel=2 --reverse")
    expect(rc == 0 and "verified intact" in out, out[-2000:])


def peer_pair(c, connections, max_bytes, timeout=240):
    pid = c.start_server("%s server 5401 %d %d %s" % (c.peer, connections, max_bytes, c.psk),
                         "listening")
    rc, out = c.tb.run("b", "%s client %s 5401 %d %d %s"
                       % (c.peer, SERVER, connections, max_bytes, c.psk), timeout)
    src, sout = c.finish_server(pid, 120)
    expect(rc == 0, "client rc %s:\n%s" % (rc, out[-2000:]))
    expect(src == 0 and "%d of %d connections intact" % (connections, connections) in sout,
           "server rc %s:\n%s" % (src, sout[-2000:]))


def case_messages_0B_to_64MiB(c):
    c.netem(DELAY + " loss 0.1%")
    peer_pair(c, 1, 64 << 20)


def case_two_connections(c):
    c.netem(DELAY + " loss 0.1%")
    peer_pair(c, 2, 1 << 20)


def case_peer_killed(c, qp=""):
    """A server killed mid-transfer: the client reports the peer unreachable (over UD, and
    with qp "--qp_type=uc" once chunks flow over the UC lane)."""
    c.netem(DELAY)
    pid = c.start_server("%s --server --datapath=verbs --bind=%s --idle_timeout=3s %s %s"
                         % (c.perf, SERVER, qp, c.server_keys), "Server listening")
    cpid = c.tb.spawn("b", "%s --client=%s --datapath=verbs --time=60 --rate=10mbit --interval=5 "
                      "--idle_timeout=3s %s %s" % (c.perf, SERVER, qp, c.client_keys),
                      "/tmp/client.log")
    ready = "UC lane up" if qp else "Accepted"
    log = "/tmp/client.log" if qp else "/tmp/server.log"
    guest = "b" if qp else "a"
    rc, _ = c.tb.run(guest, "timeout 30 sh -c 'until grep -q \"%s\" %s; do sleep 0.05; done'"
                     % (ready, log), 40)
    expect(rc == 0, "the connection never got to '%s'" % ready)
    c.tb.kill("a", pid)
    crc = c.tb.wait("b", cpid, 40)
    if crc is None:
        c.tb.kill("b", cpid)
    _, out = c.tb.run("b", "cat /tmp/client.log", 10)
    expect(crc not in (None, 0), "client rc %s after the server was killed:\n%s" % (crc, out[-2000:]))
    expect("peer unreachable" in out, out[-2000:])


def case_uc_unequal_chunks(c):
    """A client of 8 KiB chunks and a server of 64 KiB: each writes at most what the other's
    ring slots hold, in both directions."""
    for reverse in (False, True):
        uc_bulk(c, " loss 0.1%", "--uc_chunk=8KiB", reverse=reverse, min_chunks=300)


def case_uc_peer_killed(c):
    case_peer_killed(c, "--qp_type=uc")


def case_uc_bulk_bursty(c):
    """Loss in bursts (Gilbert-Elliott: a burst of 3.3 packets on average, 1.6 % lost)."""
    uc_bulk(c, " loss gemodel 0.5% 30%")


def case_checkout_under_tmp(c):
    """A build under /tmp runs in the guests, whose own tmpfs covers /tmp (Testbed keep=):
    a copy of longhaul-keygen in a folder under the host's /tmp, run in both guests."""
    keygen = os.path.join(c.tmp_share, "longhaul-keygen")
    for g in lt.GUESTS:
        rc, out = c.tb.run(g, "%s --help" % keygen, 30)
        expect(rc == 0 and "longhaul-keygen" in out,
               "guest %s could not run %s: rc %s %s" % (g, keygen, rc, out[-500:]))
    # ... while the guest's own files under /tmp stay its own.
    rc, out = c.tb.run("a", "echo mine > /tmp/guest-only && cat /tmp/guest-only", 10)
    expect(rc == 0 and "mine" in out, out)
    expect(not os.path.exists("/tmp/guest-only"), "a guest's /tmp file appeared on the host")


def uc_stream(c, netem, chunk_bytes, chunks, rate_mbit, min_percent):
    """One UC lane streaming between the guests (tests/rdma/uc_probe.cc): `chunks` chunks of
    `chunk_bytes` paced at `rate_mbit`, a late duplicate replayed every 10 chunks with its
    old key; the server checks every chunk byte by byte, that none comes twice, and that
    at least `min_percent` % arrived."""
    c.netem(netem)
    pid = c.start_server("%s server %s 6100 %d %d" % (c.uc_probe, SERVER, chunk_bytes, min_percent),
                         "uc_probe: listening", log="/tmp/uc-server.log")
    rc, out = c.tb.run("b", "%s client %s 6100 %d 198.18.1.2 %d %d 10"
                       % (c.uc_probe, SERVER, chunk_bytes, chunks, rate_mbit), 200)
    src, sout = c.finish_server(pid, timeout=200, log="/tmp/uc-server.log")
    expect(rc == 0, "client rc %s: %s" % (rc, out[-1500:]))
    expect(src == 0 and "server ok" in sout, "server rc %s: %s" % (src, sout[-1500:]))
    expect("none twice" in sout and "replays sent" in sout, sout[-1500:])


def case_uc_lane_64k(c):
    # 16-packet writes; no netem: on rxe a cut message stalls a UC queue pair (docs/rdma.md 7.11)
    uc_stream(c, "", 65536, 400, 50, 98)


def case_uc_lane_4k_loss1e2(c):
    uc_stream(c, DELAY + " loss 1%", 4096, 3000, 100, 90)


def case_uc_lane_4k_dup5_reorder(c):
    uc_stream(c, DELAY + " duplicate 5% reorder 5% 50%", 4096, 3000, 100, 90)


def rxe_sent_packets(c, guest):
    rc, out = c.tb.run(guest, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts", 20)
    expect(rc == 0, out)
    return int(out.strip())


def uc_counts(text):
    """(lanes opened, chunks sent, received, late duplicates written) from longhaul-perf's
    'verbs uc:' line, or None."""
    m = re.search(r"verbs uc: (\d+) lane\(s\) opened, (\d+) chunks sent \([^)]*\), (\d+) received"
                  r".* (\d+) late duplicates written", text)
    return tuple(int(x) for x in m.groups()) if m else None


def zero_copy(text):
    """(payload bytes gathered from registered memory, regions, payload bytes copied) from
    longhaul-perf's 'verbs uc:' line (docs/rdma.md 7.14), or None."""
    m = re.search(r"zero copy: +([\d.]+) (\w?)Bytes of payload gathered from (\d+) registered "
                  r"region\(s\), +([\d.]+) (\w?)Bytes copied", text)
    if not m:
        return None
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return (float(m.group(1)) * scale[m.group(2)], int(m.group(3)),
            float(m.group(4)) * scale[m.group(5)])


def expect_zero_copy(sender_text, payload_bytes, sealed):
    """The sender's payload went by reference (plaintext: at least 90 % of it gathered by
    the NIC from the registered pattern, less than 10 % copied) or not at all (sealed:
    the seal is the one pass)."""
    z = zero_copy(sender_text)
    expect(z is not None, "no zero-copy counts:\n" + sender_text[-1500:])
    if sealed:
        expect(z[0] == 0, "a sealed connection sent by reference:\n" + sender_text[-1500:])
        return
    expect(z[1] >= 1 and z[0] >= 0.9 * payload_bytes and z[2] < 0.1 * payload_bytes,
           "the plaintext payload was not sent by reference: %s\n%s" % (z, sender_text[-1500:]))


def uc_bulk(c, netem_extra, flags="", keys=None, reverse=False, server_qp="uc", server_flags="",
            min_chunks=50):
    """A transfer with the UC datapath on (docs/rdma.md 7): intact at both ends, and the
    chunks went over the lane (the sender wrote them, the receiver was handed them)."""
    c.netem(DELAY + netem_extra)
    skeys, ckeys = (keys, keys) if keys else (None, None)
    rc, out, src, sout = c.perf_pair(
        "--bytes=6MiB --rate=20mbit --interval=5 --qp_type=uc %s%s"
        % (flags, " --reverse" if reverse else ""),
        server_flags="--qp_type=%s %s" % (server_qp, server_flags), server_keys=skeys,
        client_keys=ckeys)
    expect(rc == 0 and "verified intact" in out, "client rc %s:\n%s" % (rc, out[-2000:]))
    expect(src == 0 and "payload intact" in sout, "server rc %s:\n%s" % (src, sout[-2000:]))
    mine = uc_counts(out)
    expect(mine is not None, "no 'verbs uc:' line:\n" + out[-2000:])
    if server_qp != "uc":
        expect(mine[0] == 0 and mine[1] == 0, "a UD-only server got chunks:\n" + out[-1500:])
        return out, sout
    theirs = uc_counts(sout)
    expect(theirs is not None, "no 'verbs uc:' line at the server:\n" + sout[-2000:])
    sender, receiver = (theirs, mine) if reverse else (mine, theirs)
    expect(sender[1] > min_chunks and receiver[2] > min_chunks,
           "chunks did not go over the UC lane (sent %d, received %d):\n%s\n%s"
           % (sender[1], receiver[2], out[-1500:], sout[-1500:]))
    return out, sout


def case_uc_bulk_clean(c):
    uc_bulk(c, "")


def case_uc_bulk_loss_1e2(c):
    """At 1 % loss a 16-packet chunk is lost 15 % of the time: the sender halves its chunk
    until fewer than 2 % of its packets are lost (docs/rdma.md 7.7)."""
    out, _ = uc_bulk(c, " loss 1%", "--bytes=12MiB")
    m = re.search(r"chunk halved (\d+) and doubled (\d+) times", out)
    expect(m and int(m.group(1)) >= 2, "the chunk did not shrink:\n" + out[-1500:])


def case_uc_bulk_dup_reorder(c):
    uc_bulk(c, " duplicate 5% reorder 5% 50%")


def case_uc_late_duplicates(c):
    """Late duplicates written through old keys into reused slots (the sender's test
    mode) never change delivered data, protected and in plaintext."""
    for keys in (None, "--insecure"):
        out, sout = uc_bulk(c, " loss 0.1%", "--uc_replay_every=2 --bytes=12MiB", keys=keys)
        expect(uc_counts(out)[3] > 30, "too few late duplicates written:\n" + out[-1500:])
        # Plaintext: zero copy, the late duplicates gathered from the pattern too.
        expect_zero_copy(out, 12 << 20, sealed=keys is None)


def lane_chunks(text):
    m = re.search(r"per lane ([\d/]+)\)", text)
    return [int(x) for x in m.group(1).split("/")] if m else []


def lanes_failed(text):
    m = re.search(r"(\d+) lanes failed", text)
    return int(m.group(1)) if m else None


def case_uc_four_lanes(c):
    """Four lanes per connection: chunks sprayed over all four, counted per lane, intact
    under loss and reorder (between lanes too)."""
    out, _ = uc_bulk(c, " loss 0.1% reorder 2% 50%", "--uc_lanes=4", server_flags="--uc_lanes=4")
    per = lane_chunks(out)
    expect(len(per) == 4 and min(per) > 10, "chunks per lane %s:\n%s" % (per, out[-1500:]))


def lanes_replaced(text):
    """(lanes failed, replaced) from the 'verbs uc:' line."""
    m = re.search(r"(\d+) lanes failed \(\d+ stalled\), (\d+) replaced", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def lanes_stalled(text):
    m = re.search(r"lanes failed \((\d+) stalled\)", text)
    return int(m.group(1)) if m else None


def case_uc_lane_error(c):
    """A writing QP forced into error mid-transfer (the test hook): with four lanes the
    other three carry on, with one UD does; a second later the lane has a new writer (its
    generation advanced, the receiver's QP reconnected) and carries chunks again. Intact
    either way."""
    for lanes in (4, 1):
        out, _ = uc_bulk(c, " loss 0.1%", "--bytes=12MiB --uc_lanes=%d --uc_fail_lane_after=40"
                         % lanes, server_flags="--uc_lanes=%d" % lanes, min_chunks=60)
        expect(lanes_replaced(out) == (1, 1),
               "%d lanes: not one lane failed and was replaced:\n%s" % (lanes, out[-1500:]))
        if lanes == 4:
            per = lane_chunks(out)
            expect(len(per) == 4 and min(per) > 10,
                   "the lanes did not all carry chunks: %s\n%s" % (per, out[-1500:]))


def case_uc_lane_stall(c):
    """A lane whose writes the peer's NIC drops without a word (the test mode writes with
    a key it does not know; UC reports nothing): the sender retires it when the peer's
    count of that lane stops, a second later a new writer carries chunks again; the
    connection goes on over its other lanes (4) or UD (1), intact."""
    for lanes in (4, 1):
        out, _ = uc_bulk(c, "", "--bytes=12MiB --uc_lanes=%d --uc_stall_lane_after=40" % lanes,
                         server_flags="--uc_lanes=%d" % lanes, min_chunks=60)
        expect(lanes_stalled(out) == 1 and lanes_replaced(out) == (1, 1),
               "%d lanes: not one lane stalled, retired and replaced:\n%s" % (lanes, out[-1500:]))


def case_uc_plaintext_reverse(c):
    """Plaintext from the server: its payload gathered by the NIC from its registered
    pattern (zero copy, docs/rdma.md 7.14), intact."""
    out, sout = uc_bulk(c, " loss 0.1%", keys="--insecure", reverse=True)
    expect("insecure (plaintext)" in out, out[-2000:])
    expect_zero_copy(sout, 6 << 20, sealed=False)


def placement(text):
    """(chunks sent direct, their payload bytes, buffers advertised, direct chunks received,
    payload bytes checked in place, bytes copied, direct chunks refused) from
    longhaul-perf's 'verbs uc:' line (docs/rdma.md 7.15), or None."""
    m = re.search(r"placement: (\d+) chunks \( *([\d.]+) (\w?)Bytes\) sent direct, (\d+) buffers "
                  r"advertised \(\d+ withdrawn\), (\d+) direct chunks received \( *([\d.]+) (\w?)Bytes in place, "
                  r"+([\d.]+) (\w?)Bytes copied\), (\d+) refused", text)
    if not m:
        return None
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    g = m.groups()
    return (int(g[0]), float(g[1]) * scale[g[2]], int(g[3]), int(g[4]),
            float(g[5]) * scale[g[6]], float(g[7]) * scale[g[8]], int(g[9]))


def case_uc_placement(c):
    """Receive-side placement (docs/rdma.md 7.15), plaintext, both directions and with four
    lanes: the receiver posts registered buffers, advertises them, and the sender's NIC
    writes most payloads straight into them, where the receiver checks them and copies
    nothing; late duplicates written through advertisements already withdrawn (the buffer
    handed back and reposted) change nothing; intact. Protected, nothing goes direct (the
    seal is the one pass)."""
    total = 12 << 20
    for reverse, lanes in ((False, 1), (True, 1), (False, 4)):
        # The late-duplicate test mode is the sender's (the server's in reverse); it
        # replays a lap back, which four lanes' 12 MiB do not reach. Four lanes: a window
        # per lane over each buffer, chunks direct on every lane.
        replay = ("--uc_replay_every=2 " if lanes == 1 else "") + "--uc_lanes=%d" % lanes
        out, sout = uc_bulk(c, " loss 0.1%", "--bytes=12MiB --uc_lanes=%d %s"
                            % (lanes, "" if reverse else replay),
                            keys="--insecure", reverse=reverse,
                            server_flags=replay if reverse else "--uc_lanes=%d" % lanes)
        sender, receiver = (sout, out) if reverse else (out, sout)
        ps, pr = placement(sender), placement(receiver)
        expect(ps is not None and pr is not None,
               "no placement counts:\n%s\n%s" % (sender[-1500:], receiver[-1500:]))
        expect(pr[2] >= 8, "too few buffers advertised: %s\n%s" % (pr, receiver[-1500:]))
        expect(ps[0] > 50 and ps[1] >= 0.7 * total,
               "the payload did not go direct: %s\n%s" % (ps, sender[-1500:]))
        expect(pr[4] >= 0.7 * total and pr[5] < 0.1 * total,
               "the payload was not checked in place: %s\n%s" % (pr, receiver[-1500:]))
        if lanes == 1:
            expect(uc_counts(sender)[3] > 30, "too few late duplicates written:\n" + sender[-1500:])
        else:
            per = lane_chunks(sender)
            expect(len(per) == 4 and min(per) > 10, "chunks per lane %s:\n%s" % (per, sender[-1500:]))
    out, sout = uc_bulk(c, " loss 0.1%", "--bytes=6MiB")
    ps, pr = placement(out), placement(sout)
    expect(ps is not None and ps[0] == 0 and pr[3] == 0,
           "a sealed connection went direct: %s %s\n%s" % (ps, pr, out[-1500:]))


def case_uc_client_ud_server(c):
    """A UD-only server: the UC client's offer is ignored and it runs over UD. A UD client
    of a UC server: the server builds no lanes for it (it builds them only on an offer)."""
    uc_bulk(c, " loss 0.1%", server_qp="ud")
    rc, out, src, sout = c.perf_pair("--bytes=3MiB --rate=20mbit --interval=5",
                                     server_flags="--qp_type=uc")
    expect(rc == 0 and "verified intact" in out, "client rc %s:\n%s" % (rc, out[-2000:]))
    expect(src == 0 and "payload intact" in sout, "server rc %s:\n%s" % (src, sout[-2000:]))
    theirs = uc_counts(sout)
    expect(theirs is not None and theirs[0] == 0 and theirs[1] == 0,
           "the UC server opened lanes for a UD client:\n" + sout[-1500:])
    expect("lane errors" in sout and " 0 lane errors" in sout, sout[-1500:])


def case_uc_messages_0B_to_64MiB(c):
    c.netem(DELAY + " loss 0.1%")
    pid = c.start_server("%s server 5401 1 %d %s uc" % (c.peer, 64 << 20, c.psk), "listening")
    rc, out = c.tb.run("b", "%s client %s 5401 1 %d %s uc" % (c.peer, SERVER, 64 << 20, c.psk),
                       240)
    src, sout = c.finish_server(pid, 120)
    expect(rc == 0, "client rc %s:\n%s" % (rc, out[-2000:]))
    expect(src == 0 and "1 of 1 connections intact" in sout, "server rc %s:\n%s" % (src, sout[-2000:]))
    m = re.search(r"uc: (\d+) chunks sent, (\d+) received, (\d+) lanes failed", out)
    n = re.search(r"uc: (\d+) chunks sent, (\d+) received, (\d+) lanes failed", sout)
    expect(m and n and int(m.group(1)) > 1000 and int(n.group(2)) > 1000 and m.group(3) == "0",
           "the messages did not go over the UC lane:\n%s\n%s" % (out[-800:], sout[-800:]))


def case_nccl_allreduce(c, qp_type="ud", zero_copy=False, staged_sender=False):
    """Two ranks, one per guest, through the NCCL plugin over verbs: every element of the
    verified run is the exact sum, and the data went through rxe0 (its packet counter);
    with qp_type uc, through each connection's UC lane (the driver's log line). zero_copy:
    in plaintext with every send in place (COPY_MAX=0), the ranks' regMr'd buffers are
    registered and the payload gathered from them (the plugin's regMr line at finalize),
    and NCCL's receive buffers offered and written by the NIC (the irecv line).
    staged_sender: as zero_copy, but rank 1 copies every send (COPY_MAX=64MiB), so rank 0's
    offered buffers are never adopted: each is withdrawn (its windows unbound) before its
    irecv completes, and the allreduce is still exact."""
    if not os.path.exists(c.rank):
        raise AssertionError("no %s (the build has no NCCL plugin)" % c.rank)
    c.netem(DELAY + " loss 0.1%")
    # The placed run goes up to 64 MiB (at a rate the TCG guests keep up with).
    big = zero_copy and not staged_sender
    env = ("NCCL_LONGHAUL_DATAPATH=verbs NCCL_LONGHAUL_IFNAME=eth0 NCCL_LONGHAUL_RATE=%s "
           "NCCL_LONGHAUL_INITIAL_RTT=58ms NCCL_LONGHAUL_QP_TYPE=%s "
           % ("100mbit" if big else "20mbit", qp_type))
    env += ("NCCL_LONGHAUL_INSECURE=1 NCCL_DEBUG=INFO" if zero_copy
            else "NCCL_LONGHAUL_PSK_FILE=%s" % c.psk)
    env0 = env + (" NCCL_LONGHAUL_COPY_MAX=0" if zero_copy else "")
    env1 = env + (" NCCL_LONGHAUL_COPY_MAX=%s" % ("64MiB" if staged_sender else "0")
                  if zero_copy else "")
    sizes = "4096,1048576,4194304" + (",67108864" if big else "")
    sent_before = rxe_sent_packets(c, "b")
    pid = c.start_server("env %s %s 0 %s:5410 %s %s 2" % (env0, c.rank, SERVER, c.plugin, sizes),
                         "control listening", log="/tmp/rank0.log")
    rc, out = c.tb.run("b", "env %s %s 1 %s:5410 %s %s 2" % (env1, c.rank, SERVER, c.plugin, sizes),
                       240)
    src, sout = c.finish_server(pid, 60, log="/tmp/rank0.log")
    expect(rc == 0 and "allreduce intact" in out, "rank 1 rc %s:\n%s" % (rc, out[-2000:]))
    expect(src == 0 and "allreduce intact" in sout, "rank 0 rc %s:\n%s" % (src, sout[-2000:]))
    expect("device eth0" in out and "size 4194304: 2 iterations" in out, out[-2000:])
    # Rank 1 sends about 4 MiB (+ 1 MiB, + 4 KiB) per run, 4 runs of each size (warm-up, 2
    # timed, 1 verified): far more 4 KiB RoCE packets than this if it went over UDP.
    sent = rxe_sent_packets(c, "b") - sent_before
    expect(sent > 4 * (4 << 20) // 4096, "rxe0 sent only %d packets" % sent)
    for line in out.splitlines():
        if line.startswith("size "):
            print("         rank 1: " + line, flush=True)
    print("         rank 1: rxe0 sent %d packets" % sent, flush=True)
    if qp_type == "uc":
        expect("UC lane up" in out and "UC lane up" in sout,
               "no UC lane came up:\n%s\n%s" % (out[-1500:], sout[-1500:]))
    if staged_sender:
        m = re.search(r"irecv: (\d+) buffers offered; (\d+) messages \((\d+) bytes\) placed "
                      r"in NCCL's buffers by the NIC, (\d+) messages \((\d+) bytes\) copied", sout)
        expect(m is not None, "no irecv line:\n" + sout[-2000:])
        offered, placed_msgs, _, _, copied = (int(x) for x in m.groups())
        print("         rank 0: " + m.group(0), flush=True)
        expect(offered > 0 and placed_msgs == 0 and copied >= 4 * (5 << 20) // 2, m.group(0))
        m = re.search(r"placement: (\d+) buffers advertised", sout)
        expect(m is not None and int(m.group(1)) > 0, "rank 0 advertised nothing:\n" + sout[-2000:])
        return
    if zero_copy:
        for text in (out, sout):
            m = re.search(r"regMr: (\d+) regions registered \((\d+) bytes\), (\d+) refused; (\d+) "
                          r"sends in place \((\d+) bytes\); zero copy: (\d+) payload bytes gathered "
                          r"from registered memory, (\d+) copied", text)
            expect(m is not None, "no regMr line:\n" + text[-2000:])
            reg, _, refused, sends, in_place, gathered, copied = (int(x) for x in m.groups())
            print("         " + m.group(0), flush=True)
            # Each rank sends about 4 x (4 MiB + 1 MiB + 4 KiB) / 2 of its own: all in
            # place, nearly all of it gathered by the NIC (a send's pieces under 256 bytes
            # and what went over UD before the lane came up are copied).
            expect(reg == 3 and refused == 0 and sends > 0, m.group(0))
            expect(gathered >= 0.9 * in_place and copied <= 0.1 * in_place, m.group(0))
            # Every irecv buffer is offered; where the offer reached the sender before
            # the message, the NIC wrote it into NCCL's buffer (placed), else it was
            # copied from the transport's memory (docs/nccl.md, "Zero copy").
            m = re.search(r"irecv: (\d+) buffers offered; (\d+) messages \((\d+) bytes\) placed "
                          r"in NCCL's buffers by the NIC, (\d+) messages \((\d+) bytes\) copied "
                          r"into them", text)
            expect(m is not None, "no irecv line:\n" + text[-2000:])
            offered, placed_msgs, placed, copied_msgs, copied = (int(x) for x in m.groups())
            print("         " + m.group(0), flush=True)
            expect(offered > 0 and placed_msgs > 0 and placed > 0, m.group(0))
            # The receiver holds each rank's 4 x (64 MiB + 4 MiB + 1 MiB + 4 KiB) / 2 in
            # some form.
            expect(placed + copied >= 4 * (69 << 20) // 2, m.group(0))


def case_nccl_allreduce_uc(c):
    case_nccl_allreduce(c, "uc")
    case_nccl_allreduce(c, "uc", zero_copy=True)
    case_nccl_allreduce(c, "uc", zero_copy=True, staged_sender=True)


def case_probe_verbs_server(c):
    """longhaul-probe against a verbs server: the listener's UDP port answers probes."""
    c.netem(DELAY)
    pid = c.start_server("%s --server --datapath=verbs --bind=%s %s"
                         % (c.perf, SERVER, c.server_keys), "Server listening")
    rc, out = c.tb.run("b", "%s --target=%s:5201 --duration=6s --max_rate=100mbit"
                       % (c.probe, SERVER), 60)
    c.tb.kill("a", pid, 2)
    c.finish_server(pid, 20)
    expect(rc == 0 and "answered" in out and "path MTU   9000" in out, out[-2000:])


CASES = [
    ("devices", case_devices),
    ("checkout_under_tmp", case_checkout_under_tmp),
    ("bad_device", case_bad_device),
    ("no_listener", case_no_listener),
    ("wrong_key", case_wrong_key),
    ("bulk_rtt58ms", case_bulk_clean),
    ("bulk_rtt58ms_loss1e-3", case_bulk_loss_1e3),
    ("bulk_rtt58ms_loss1e-2", case_bulk_loss_1e2),
    ("bulk_rtt58ms_reorder", case_bulk_reorder),
    ("bulk_plaintext_loss1e-3", case_bulk_plaintext),
    ("fec_loss1e-2", case_fec),
    ("reverse_parallel2", case_reverse_and_parallel),
    ("messages_0B_to_64MiB", case_messages_0B_to_64MiB),
    ("two_connections", case_two_connections),
    ("peer_killed", case_peer_killed),
    ("nccl_allreduce_2_ranks", case_nccl_allreduce),
    ("nccl_allreduce_2_ranks_uc", case_nccl_allreduce_uc),
    ("probe_verbs_server", case_probe_verbs_server),
    ("uc_bulk_rtt58ms", case_uc_bulk_clean),
    ("uc_bulk_rtt58ms_loss1e-2", case_uc_bulk_loss_1e2),
    ("uc_bulk_dup5_reorder5", case_uc_bulk_dup_reorder),
    ("uc_bulk_bursty_loss", case_uc_bulk_bursty),
    ("uc_peer_killed", case_uc_peer_killed),
    ("uc_unequal_chunks", case_uc_unequal_chunks),
    ("uc_late_duplicates", case_uc_late_duplicates),
    ("uc_four_lanes", case_uc_four_lanes),
    ("uc_lane_error", case_uc_lane_error),
    ("uc_lane_stall", case_uc_lane_stall),
    ("uc_plaintext_reverse", case_uc_plaintext_reverse),
    ("uc_placement", case_uc_placement),
    ("uc_client_ud_server", case_uc_client_ud_server),
    ("uc_messages_0B_to_64MiB", case_uc_messages_0B_to_64MiB),
    ("uc_lane_64k", case_uc_lane_64k),
    ("uc_lane_4k_loss1e-2", case_uc_lane_4k_loss1e2),
    ("uc_lane_4k_dup5_reorder", case_uc_lane_4k_dup5_reorder),
]


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--build_dir", required=True)
    ap.add_argument("--cases", default="", help="comma-separated names (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args(argv)
    build = os.path.abspath(args.build_dir)
    if not os.path.exists(os.path.join(build, "tests", "verbs_peer")):
        print("skipped: this build has no verbs driver (libibverbs-dev missing)")
        return lt.SKIP
    if lt.skipped():
        return lt.SKIP
    chosen = [c for c in CASES if not args.cases or c[0] in args.cases.split(",")]
    work = os.path.join(build, "rdma-testbed")
    shutil.rmtree(work, ignore_errors=True)
    passed = failed = 0
    start = time.monotonic()
    # A folder under /tmp (where a checkout may live) that the guests must see: the
    # checkout_under_tmp case runs a copy of longhaul-keygen from it.
    tmp_share = tempfile.mkdtemp(prefix="longhaul-rdma-", dir="/tmp")
    shutil.copy2(os.path.join(build, "bin", "longhaul-keygen"), tmp_share)
    try:
        with lt.Testbed(work, keep=[build, tmp_share]) as tb:
            print("testbed: two guests booted in %.1f s (%s)" % (tb.boot_s, tb.accel), flush=True)
            c = Case(tb, build, lt.Keys(build, os.path.join(build, "rdma-keys")), tmp_share)
            # A guest that cannot see the build fails here, once, with the paths it misses.
            tb.require([c.perf, c.peer, c.probe, c.uc_probe, c.keys])
            for name, fn in chosen:
                t0 = time.monotonic()
                try:
                    fn(c)
                    passed += 1
                    print("[ OK   ] %s (%.1f s)" % (name, time.monotonic() - t0), flush=True)
                except (AssertionError, TimeoutError, RuntimeError) as e:
                    failed += 1
                    print("[ FAIL ] %s (%.1f s): %s" % (name, time.monotonic() - t0, e), flush=True)
    except (TimeoutError, RuntimeError) as e:
        print("testbed failed: %s" % e)
        failed += 1
    finally:
        shutil.rmtree(tmp_share, ignore_errors=True)
    print("rdma tier: %.1f s in all" % (time.monotonic() - start))
    print("%d passed, %d failed" % (passed, failed))
    if failed == 0 and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
