# longhaul tuned profile
# command: longhaul-tune --link=transpacific --out=profiles/transpacific.profile
# version: longhaul 0.1.0
# date: 2026-11-29T22:11:29Z
# link: rate=100gbit rtt=150.000ms (p50 150.100ms, p99 150.186ms) loss=1e-05 burst=1 mtu=9000 [link rate=100gbit,rtt=150ms,jitter=100us,loss=1e-05]
# objective: goodput (bulk transfer)
# predicted: goodput 99.17 Gbit/s (model, an unbounded transfer; limited by pacing)
# checked: goodput 79.46 Gbit/s (model for that run: 82.18 Gbit/s) in the simulator (bulk 6786MiB on rate=100gbit,rtt=150ms,jitter=100us,loss=1e-05,queue=1875000000,seed=1; best of 3 candidates)
# host: net.core.rmem_max >= 2147483647, net.core.wmem_max >= 2147483647, IP MTU >= 9000
segment=8894
window=5354MiB
recv_window=5327MiB
max_inflight_messages=65536
flows=1
cc=fixed
rate=100gbit
cc_loss_threshold=0.03
ecn=true
pacing_burst=2ms
tail_protect=true
reorder_packets=16
reorder_rtt_fraction=0.125
initial_rtt=151ms
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
