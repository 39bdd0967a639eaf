# longhaul tuned profile
# command: longhaul-tune --link=lossy-1g --objective=mct --message_size=4MiB --out=profiles/lossy-1g-mct-4MiB.profile
# version: longhaul 0.1.0
# date: 2026-11-29T22:11:37Z
# link: rate=1gbit rtt=58.000ms (p50 59.000ms, p99 59.859ms) loss=0.01 burst=1 mtu=9000 [link rate=1gbit,rtt=58ms,jitter=1ms,loss=0.01]
# objective: mct (p99 completion of 4MiB messages at load 0.5)
# predicted: mct p99 68.224 ms, mean 68.150 ms (ideal 62.955 ms), goodput 879.9 Mbit/s (model)
# checked: mct p99 67.869 ms, mean 67.403 ms (model for that run: p99 68.224 ms) in the simulator (messages 635 x 4MiB at load 0.5 on rate=1gbit,rtt=58ms,jitter=1ms,loss=0.01,queue=7250000,seed=1; best of 3 candidates)
# host: net.core.rmem_max >= 24117248, net.core.wmem_max >= 24117248, IP MTU >= 9000
segment=8894
window=23MiB
recv_window=20MiB
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
initial_rtt=60ms
min_pto=5ms
max_pto=10s
ack_every=32
max_ack_delay=1ms
max_ack_ranges=128
fec=32,4
fec_k=32
fec_m=4
fec_interleave=1
fec_flush=1ms
idle_timeout=30s
keepalive=5s
# end of longhaul tuned profile (26 keys)
