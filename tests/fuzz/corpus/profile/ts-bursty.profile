# longhaul tuned profile
# command: longhaul-tune --link=ts-bursty --out=profiles/ts-bursty.profile
# version: longhaul 0.1.0
# date: 2026-11-29T22:11:10Z
# link: rate=100gbit rtt=58.000ms (p50 58.000ms, p99 58.000ms) loss=0.001 burst=8 mtu=9000 reorder=0.0001 late=1.000ms [link rate=100gbit,rtt=58ms,loss=0.001,burst=8,reorder=0.0001]
# objective: goodput (bulk transfer)
# predicted: goodput 99.08 Gbit/s (model, an unbounded transfer; limited by pacing)
# checked: goodput 85.17 Gbit/s (model for that run: 85.37 Gbit/s) in the simulator (bulk 4149MiB on rate=100gbit,rtt=58ms,loss=0.001,burst=8,reorder=0.0001,queue=725000000,seed=1; best of 3 candidates)
# host: net.core.rmem_max >= 2147483647, net.core.wmem_max >= 2147483647, IP MTU >= 9000
segment=8894
window=2096MiB
recv_window=2083MiB
max_inflight_messages=65536
flows=1
cc=fixed
rate=100gbit
cc_loss_threshold=0.03
ecn=true
pacing_burst=2ms
tail_protect=true
reorder_packets=2091
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
