#!/usr/bin/env python3
"""Test vectors for longhaul's Noise handshake made by dissononce, a Python implementation
of the Noise protocol framework (Debian package python3-dissononce), in the same text format
as tools/interop/noise_vectors.mjs writes. dissononce runs all three of longhaul's handshakes
with AESGCM, the psk modifiers included (noise-c's builds on npm have one or the other), and
gives the handshake hash, which flynn/noise's published vectors do not record.

Usage:
  python3 noise_vectors_dissononce.py            fixed inputs (the committed vectors)
  python3 noise_vectors_dissononce.py --random N N vectors of random inputs per pattern
Exit status 77 when dissononce is not installed (apt-get install python3-dissononce; it
lives in Debian's Python, /usr/bin/python3).
"""

import os
import sys

try:
    from dissononce.cipher.aesgcm import AESGCMCipher
    from dissononce.dh.private import PrivateKey
    from dissononce.dh.x25519.x25519 import X25519DH
    from dissononce.extras.dh.dangerous.dh_nogen import NoGenDH
    from dissononce.hash.sha256 import SHA256Hash
    from dissononce.processing.handshakepatterns.interactive.IK import IKHandshakePattern
    from dissononce.processing.handshakepatterns.interactive.NN import NNHandshakePattern
    from dissononce.processing.impl.cipherstate import CipherState
    from dissononce.processing.impl.handshakestate import HandshakeState
    from dissononce.processing.impl.symmetricstate import SymmetricState
    from dissononce.processing.modifiers.psk import PSKPatternModifier
except ImportError:
    sys.stderr.write('dissononce is not installed: apt-get install python3-dissononce\n')
    sys.exit(77)

PATTERNS = {
    'IK': lambda: IKHandshakePattern(),
    'IKpsk1': lambda: PSKPatternModifier(1).modify(IKHandshakePattern()),
    'NNpsk0': lambda: PSKPatternModifier(0).modify(NNHandshakePattern()),
}

HEADER = """# Noise_{IK,IKpsk1,NNpsk0}_25519_AESGCM_SHA256 test vectors produced by running
# dissononce 0.34.3 (a Python implementation of the Noise protocol framework, Debian
# package python3-dissononce) with fixed static and ephemeral keys, both roles.
# Regenerate: /usr/bin/python3 tools/interop/noise_vectors_dissononce.py
# msg_0/msg_1: the two handshake messages; handshake_hash: h after them; msg_2/msg_3: the
# payload encrypted with dissononce's split cipher states (initiator to responder,
# responder to initiator; nonce 0, no associated data).
"""

KEYS = ['handshake', 'init_static', 'resp_static', 'gen_init_ephemeral', 'gen_resp_ephemeral',
        'prologue', 'preshared_key', 'msg_0_payload', 'msg_0_ciphertext', 'msg_1_payload',
        'msg_1_ciphertext', 'handshake_hash', 'msg_2_payload', 'msg_2_ciphertext',
        'msg_3_payload', 'msg_3_ciphertext']


def state(ephemeral_private):
    dh = NoGenDH(X25519DH(), PrivateKey(ephemeral_private))
    return HandshakeState(SymmetricState(CipherState(AESGCMCipher()), SHA256Hash()), dh)


def run(v):
    """Runs one handshake, both roles; fills in the ciphertexts and the hash."""
    name = v['handshake'].split('_')[1]
    ik = name.startswith('IK')
    x = X25519DH()
    prologue = bytes.fromhex(v.get('prologue', ''))
    psks = [bytes.fromhex(v['preshared_key'])] if 'preshared_key' in v else None
    si = x.generate_keypair(PrivateKey(bytes.fromhex(v['init_static']))) if ik else None
    sr = x.generate_keypair(PrivateKey(bytes.fromhex(v['resp_static']))) if ik else None
    ini = state(bytes.fromhex(v['gen_init_ephemeral']))
    res = state(bytes.fromhex(v['gen_resp_ephemeral']))
    ini.initialize(PATTERNS[name](), True, prologue, s=si, rs=sr.public if ik else None,
                   psks=list(psks) if psks else None)
    res.initialize(PATTERNS[name](), False, prologue, s=sr, psks=list(psks) if psks else None)
    assert ini.protocol_name == v['handshake'], ini.protocol_name

    m0 = bytearray()
    ini.write_message(bytes.fromhex(v['msg_0_payload']), m0)
    p0 = bytearray()
    res.read_message(bytes(m0), p0)
    assert bytes(p0) == bytes.fromhex(v['msg_0_payload'])
    if ik:
        assert res.rs.data == si.public.data
    m1 = bytearray()
    rcs = res.write_message(bytes.fromhex(v['msg_1_payload']), m1)
    h = res.symmetricstate.get_handshake_hash()
    p1 = bytearray()
    ics = ini.read_message(bytes(m1), p1)
    assert bytes(p1) == bytes.fromhex(v['msg_1_payload'])
    assert ini.symmetricstate.get_handshake_hash() == h
    t0 = ics[0].encrypt_with_ad(b'', bytes.fromhex(v['msg_2_payload']))
    t1 = rcs[1].encrypt_with_ad(b'', bytes.fromhex(v['msg_3_payload']))
    assert rcs[0].decrypt_with_ad(b'', t0) == bytes.fromhex(v['msg_2_payload'])
    assert ics[1].decrypt_with_ad(b'', t1) == bytes.fromhex(v['msg_3_payload'])
    v.update(msg_0_ciphertext=bytes(m0).hex(), msg_1_ciphertext=bytes(m1).hex(),
             handshake_hash=bytes(h).hex(), msg_2_ciphertext=t0.hex(), msg_3_ciphertext=t1.hex())
    return v


def fmt(v):
    return ''.join('%s=%s\n' % (k, v[k]) for k in KEYS
                   if k in v and (v[k] != '' or k.endswith('_payload')))


def ascii_hex(s):
    return s.encode().hex()


# The first key set is the one the Noise test-vector files use; the second looks like
# what longhaul sends (a Hello-sized prologue, payloads of a few dozen bytes).
FIXED = [
    dict(init_static='000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f',
         resp_static='0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20',
         gen_init_ephemeral='202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f',
         gen_resp_ephemeral='4142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f60',
         preshared_key=ascii_hex('!verysecretverysecretverysecret!'),
         prologue=ascii_hex('notsecret'), msg_0_payload=ascii_hex('test_msg_0'),
         msg_1_payload=ascii_hex('test_msg_1')),
    dict(init_static='e61ef9919cde45dd5f82166404bd08e38bceb5dfdfded0a34c8df7ed542214d1',
         resp_static='4a3acbfdb163dec651dfa3194dece676d437029c62a408b4c5ea9114246e4893',
         gen_init_ephemeral='893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a',
         gen_resp_ephemeral='bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b',
         preshared_key='5d3e0f1c2b4a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0',
         prologue=ascii_hex('longhaul hello v1: 3 connection ids, 24 parameters, ') +
         'ff' * 8 + '00' * 64,
         msg_0_payload=ascii_hex('{"client":"interop","streams":16,"mtu":8952}'),
         msg_1_payload=ascii_hex('{"accept":true,"profile":"lfn-100g"}')),
]


def main(argv):
    random_n = int(argv[2]) if len(argv) == 3 and argv[1] == '--random' else 0
    out = []
    for name in PATTERNS:
        handshake = 'Noise_%s_25519_AESGCM_SHA256' % name
        inputs = []
        if random_n:
            rnd = lambda n: os.urandom(n).hex()
            for i in range(random_n):
                inputs.append(dict(init_static=rnd(32), resp_static=rnd(32),
                                   gen_init_ephemeral=rnd(32), gen_resp_ephemeral=rnd(32),
                                   preshared_key=rnd(32), prologue=rnd(i % 97),
                                   msg_0_payload=rnd((i * 7) % 130),
                                   msg_1_payload=rnd((i * 13) % 90),
                                   msg_2_payload=rnd(1 + i % 200),
                                   msg_3_payload=rnd(1 + (i * 3) % 200)))
        else:
            for keys in FIXED:
                inputs.append(dict(keys, msg_2_payload=ascii_hex('yellowsubmarine'),
                                   msg_3_payload=ascii_hex('submarineyellow')))
        for v in inputs:
            v['handshake'] = handshake
            if name == 'IK':
                del v['preshared_key']
            if name == 'NNpsk0':
                del v['init_static'], v['resp_static']
            out.append(fmt(run(v)))
    head = ('# %d vectors of random inputs per pattern from dissononce.\n' % random_n
            if random_n else HEADER)
    sys.stdout.write(head + ''.join('\n' + v for v in out))


if __name__ == '__main__':
    main(sys.argv)
