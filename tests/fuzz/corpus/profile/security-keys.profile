# a tool's profile with its keys (docs/security.md)
window=256MiB
key = keys/rank0.key   # this side
peer_key=/etc/longhaul/peers
psk_file=psk
insecure=no
mtu=9000
fec=auto
