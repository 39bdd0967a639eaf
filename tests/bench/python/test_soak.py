"""soak's pure parts: the blackout schedule, the clients' and the server's problems, the
emulator's summary and the clients' commands."""

import types

from longhaul_bench.commands import soak


def test_blackout_schedule_ends_before_the_run():
    sched, windows = soak.blackout_schedule("1e-3", 60, 20, 2)
    assert sched == "20s:loss=1,22s:loss=1e-3,40s:loss=1,42s:loss=1e-3"
    assert windows == [[20, 22], [40, 42]]
    assert soak.blackout_schedule("0", 20, 20, 2) == ("", [])


def test_server_problems():
    assert soak.server_problems([{"intact": True}, {"intact": True}]) == []
    assert soak.server_problems([{"intact": False, "test_id": 7, "errors": ["gap"]}]) == [
        "the server reported 1 finished tests, expected 2",
        "server: test 7 not intact: ['gap']"]


def test_emulator_info():
    assert soak.emulator_info(None) == {}
    final = {"own_drops": 0, "forward": {"model": {"delivered": 5}}, "reverse": {}}
    assert soak.emulator_info(final) == {"own_drops": 0, "forward": {"delivered": 5},
                                         "reverse": None}


def test_client_cmds():
    a = types.SimpleNamespace(sample_s=5, bulk_rate="100mbit", msg_rate="50mbit", load=0.5,
                              message_size="256KiB")
    st = types.SimpleNamespace(perf="/b/longhaul-perf", ready={"listen_port": 4242}, dur=60,
                               keys=["--insecure"])
    bulk, msg = soak.client_cmds(a, st)
    common = ["--client=127.0.0.1", "--port=4242", "--json", "--time=60s", "--timeout=150s",
              "--interval=5", "--connect_timeout=10s", "--insecure"]
    assert bulk == ["/b/longhaul-perf"] + common + ["--rate=100mbit", "--message_size=1MiB"]
    assert msg == ["/b/longhaul-perf"] + common + ["--workload=messages", "--rate=50mbit",
                                                   "--load=0.5", "--message_size=256KiB"]


def test_client_results(tmp_path):
    outs = {}
    for name, text in (("bulk_client", '{"end": {}}'), ("msg_client", "not json")):
        f = open(tmp_path / (name + ".json"), "w+")
        f.write(text)
        outs[name] = f
    st = types.SimpleNamespace(clients={"bulk_client": None, "msg_client": None}, outs=outs)
    problems, numbers, parsed = soak.client_results(st, {"bulk_client": 0, "msg_client": 0})
    assert parsed["bulk_client"] == {"end": {}} and parsed["msg_client"] is None
    assert "msg_client client: no JSON result" in problems
    assert numbers["msg_client"] == {"exit": 0}
    for f in outs.values():
        f.close()
