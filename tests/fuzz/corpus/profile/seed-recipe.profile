# The commonly copied RDMA recipe, written as a longhaul profile. It is the baseline the
# tuner is measured against (docs/tuning.md, "Tuning quality"); do not use it.
#
#   mtu=4096        RoCE's largest path MTU, copied as is (segments of 3990 bytes)
#   window=1MiB     a 1 MB send window (e.g. 128 outstanding 8 KiB work requests), sized
#                   for a data centre's microseconds: 1 MiB per round trip is 145 Mbit/s
#                   on a 58 ms path, whatever the link
#   recv_window     the same 1 MiB on the receiving side
#   selective repeat (longhaul's only repair mode)
#   fec=32,8        a fixed Reed-Solomon (32,8) as in published long-haul RDMA designs
#                   (SDR-RDMA: (32,8) over ISA-L): 25 % parity whatever the loss, chosen
#                   once for a bad day and never revisited
#   cc=fixed        paced at a fixed rate; the rate is left to the tool (longhaul-sim
#                   paces at the link's rate when a profile does not set one)
mtu=4096
window=1MiB
recv_window=1MiB
cc=fixed
fec=32,8
fec_interleave=1
