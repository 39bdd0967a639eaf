# longhaul tuned profile
# command: longhaul-tune --link=ts-1g --out=profiles/ts-1g.profile
# version: longhaul 0.1.0
# date: 2026-11-29T22:10:43Z
# link: rate=1gbit rtt=58.000ms (p50 58.000ms, p99 58.000ms) loss=0.001 burst=1 mtu=9000 [link rate=1gbit,rtt=58ms,loss=0.001]
# objective: goodput (bulk transfer)
# predicted: goodput 990.8 Mbit/s (model, an unbounded transfer; limited by pacing)
# checked: goodput 989.1 Mbit/s (model for that run: 988.1 Mbit/s) in the simulator (bulk 1697MiB on rate=1gbit,rtt=58ms,loss=0.001,queue=7250000,seed=1; best of 3 candidates)
# host: net.core.rmem_max >= 23068672, net.core.wmem_max >= 23068672, IP MTU >= 9000
segment=8894
window=22MiB
recv_window=22MiB
max_inflight_messages=65536
flows=1
cc=fixed
rate=1gbit
cc_loss_threshold=0.03
ecn=true
pacing_burst=2ms
tail_protect=true
reorder_packets=16
reorder_rtt_fraction=0.125
initial_rtt=58ms
min_pto=5ms
max_pto=10s
ack_every=32
max_ack_delay=1ms
max_ack_ranges=128
fec=off
fec_k=32
fec_m=4
fec_interleave=8
fec_flush=1ms
idle_timeout=30s
keepalive=5s
# end of longhaul tuned profile (26 keys)
