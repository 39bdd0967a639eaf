#!/usr/bin/env node
// Test vectors for longhaul's Noise handshake (transport/crypto/noise.{h,cc}), made by
// implementations the project did not write, in the text format the Noise test-vector
// files use (key=value lines, one blank line between vectors):
//
//   handshake=Noise_IK_25519_AESGCM_SHA256
//   init_static=..  resp_static=..           private keys (IK patterns)
//   gen_init_ephemeral=..  gen_resp_ephemeral=..   the two ephemeral private keys
//   prologue=..  preshared_key=..            (absent: empty / none)
//   msg_0_payload=..  msg_0_ciphertext=..    message 1 (initiator to responder)
//   msg_1_payload=..  msg_1_ciphertext=..    message 2
//   handshake_hash=..                        h after message 2 (where the source gives it)
//   msg_2_payload=..  msg_2_ciphertext=..    after Split: the initiator-to-responder key,
//                                            nonce 0, no associated data
//   msg_3_payload=..  msg_3_ciphertext=..    the responder-to-initiator key, nonce 0
//
// Sources, all installed by their ordinary package managers:
//   noise-c     rweather/noise-c compiled to WebAssembly, npm package noise-c.wasm 0.4.0
//               (25519, AESGCM and ChaChaPoly, SHA256; the handshake patterns, without
//               the psk modifiers), and npm package @richardhopton/noise-c.wasm 0.5.0
//               (a later noise-c with the psk modifiers, but ChaChaPoly only). Pinned in
//               tools/interop/package.json; install with `npm ci --prefix tools/interop`.
//   flynn/noise the vectors.txt that the Go implementation publishes (Debian package
//               golang-github-flynn-noise-dev, /usr/share/gocode/src/github.com/flynn/
//               noise/vectors.txt): IK, IKpsk1 and NNpsk0 with 25519_AESGCM_SHA256.
//
// No noise-c build has both AESGCM and the psk modifiers, so IKpsk1 and NNpsk0 with
// AESGCM come from flynn/noise's file and from dissononce (noise_vectors_dissononce.py
// beside this script); check-flynn replays flynn/noise's IK entries
// (AESGCM) and its IKpsk1 and NNpsk0 entries (ChaChaPoly) on noise-c, so the file is
// shown to agree with noise-c wherever noise-c can run it.
//
// Usage:
//   node noise_vectors.mjs noise-c [--random N] > noise_c_vectors.txt
//       IK vectors from noise-c: fixed keys, or N vectors of random keys, prologue and
//       payloads (the live test)
//   node noise_vectors.mjs flynn PATH/vectors.txt > flynn_noise_vectors.txt
//       the AESGCM_SHA256 vectors of the three patterns from flynn/noise's file, verbatim
//   node noise_vectors.mjs check-flynn PATH/vectors.txt
//       replays the file's IK/IKpsk1/NNpsk0 _25519_*_SHA256 vectors on noise-c; exit 1 on
//       any disagreement
// Exit status 77 when the npm packages are not installed.

import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const PATTERNS = ['IK', 'IKpsk1', 'NNpsk0'];

function loadNoise(pkg) {
  // The packages live in tools/interop/node_modules, or under LONGHAUL_INTEROP_NODE_MODULES.
  const roots = [process.env.LONGHAUL_INTEROP_NODE_MODULES, join(here, 'node_modules')]
      .filter(Boolean);
  for (const root of roots) {
    let create;
    try {
      create = createRequire(join(root, 'x.js'))(pkg);
    } catch {
      continue;
    }
    // The Emscripten loader notes that it falls back from streaming compilation (harmless
    // under node); keep that out of the vectors and the log.
    const log = console.log, warn = console.warn;
    console.log = console.warn = (...a) => {
      const line = a.join(' ');
      if (!/streaming compile failed|falling back to ArrayBuffer/.test(line)) {
        process.stderr.write(line + '\n');
      }
    };
    return new Promise((resolve) => create((noise) => {
      console.log = log;
      console.warn = warn;
      resolve(noise);
    }));
  }
  process.stderr.write(`npm package ${pkg} is not installed: npm ci --prefix ${here}\n`);
  process.exit(77);
}

const hex = (b) => Buffer.from(b).toString('hex');
const unhex = (s) => new Uint8Array(Buffer.from(s || '', 'hex'));
const same = (a, b) => hex(a) === hex(b);

function publicKey(noise, priv) {
  const lib = noise._lib_internal;
  const p = lib.allocatePointer();
  check(noise, lib._noise_dhstate_new_by_id(p, noise.constants.NOISE_DH_CURVE25519));
  const dh = p.dereference();
  p.free();
  const k = lib.allocateBytes(0, priv);
  check(noise, lib._noise_dhstate_set_keypair_private(dh, k, 32));
  k.free();
  const out = lib.allocateBytes(32);
  check(noise, lib._noise_dhstate_get_public_key(dh, out, 32));
  const pub = out.get();
  out.free();
  lib._noise_dhstate_free(dh);
  return pub;
}

function check(noise, err) {
  if (err === noise.constants.NOISE_ERROR_NONE) return;
  const name = Object.keys(noise.constants).find((k) => noise.constants[k] === err);
  throw new Error(`noise-c: ${name || err}`);
}

// noise-c's testing hook: the ephemeral key the next 'e' token uses.
function fixEphemeral(noise, hs, priv) {
  const lib = noise._lib_internal;
  const dh = lib._noise_handshakestate_get_fixed_ephemeral_dh(hs._state);
  if (!dh) throw new Error('noise-c: no fixed-ephemeral hook');
  const k = lib.allocateBytes(0, priv);
  check(noise, lib._noise_dhstate_set_keypair_private(dh, k, 32));
  k.free();
}

// Runs one handshake on noise-c, both roles, and returns what a vector records.
// `v` has handshake, init_static, resp_static, gen_init_ephemeral, gen_resp_ephemeral,
// prologue, preshared_key (hex) and the four payloads (msg_N_payload).
function runNoiseC(noise, v) {
  const C = noise.constants;
  const prologue = v.prologue ? unhex(v.prologue) : null;
  const psk = v.preshared_key ? unhex(v.preshared_key) : null;
  const ik = !v.handshake.startsWith('Noise_NN');
  const ini = noise.HandshakeState(v.handshake, C.NOISE_ROLE_INITIATOR);
  const res = noise.HandshakeState(v.handshake, C.NOISE_ROLE_RESPONDER);
  ini.Initialize(prologue, ik ? unhex(v.init_static) : null,
                 ik ? publicKey(noise, unhex(v.resp_static)) : null, psk);
  res.Initialize(prologue, ik ? unhex(v.resp_static) : null, null, psk);
  fixEphemeral(noise, ini, unhex(v.gen_init_ephemeral));
  fixEphemeral(noise, res, unhex(v.gen_resp_ephemeral));
  const out = {};
  const p0 = unhex(v.msg_0_payload), p1 = unhex(v.msg_1_payload);
  const m0 = ini.WriteMessage(p0.length ? p0 : null);
  const got0 = res.ReadMessage(m0, true);
  if (!same(got0, p0)) throw new Error('noise-c: payload 1 does not round-trip');
  if (ik && !same(res.GetRemotePublicKey(), publicKey(noise, unhex(v.init_static)))) {
    throw new Error('noise-c: the responder saw another static key');
  }
  const m1 = res.WriteMessage(p1.length ? p1 : null);
  const got1 = ini.ReadMessage(m1, true);
  if (!same(got1, p1)) throw new Error('noise-c: payload 2 does not round-trip');
  if (ini.GetAction() !== C.NOISE_ACTION_SPLIT || res.GetAction() !== C.NOISE_ACTION_SPLIT) {
    throw new Error('noise-c: the handshake is not complete after two messages');
  }
  const h = ini.GetHandshakeHash();
  if (!same(h, res.GetHandshakeHash())) throw new Error('noise-c: the two hashes differ');
  const [iSend, iRecv] = ini.Split();
  const [rSend, rRecv] = res.Split();
  const none = new Uint8Array(0);
  const t0 = iSend.EncryptWithAd(none, unhex(v.msg_2_payload));
  const t1 = rSend.EncryptWithAd(none, unhex(v.msg_3_payload));
  if (!same(rRecv.DecryptWithAd(none, t0), unhex(v.msg_2_payload)) ||
      !same(iRecv.DecryptWithAd(none, t1), unhex(v.msg_3_payload))) {
    throw new Error('noise-c: the split keys do not pair up');
  }
  for (const cs of [iSend, iRecv, rSend, rRecv]) cs.free();
  out.msg_0_ciphertext = hex(m0);
  out.msg_1_ciphertext = hex(m1);
  out.handshake_hash = hex(h);
  out.msg_2_ciphertext = hex(t0);
  out.msg_3_ciphertext = hex(t1);
  return out;
}

function format(v) {
  const keys = ['handshake', 'init_static', 'resp_static', 'gen_init_ephemeral',
                'gen_resp_ephemeral', 'prologue', 'preshared_key', 'msg_0_payload',
                'msg_0_ciphertext', 'msg_1_payload', 'msg_1_ciphertext', 'handshake_hash',
                'msg_2_payload', 'msg_2_ciphertext', 'msg_3_payload', 'msg_3_ciphertext'];
  return keys.filter((k) => v[k] !== undefined && (v[k] !== '' || k.endsWith('_payload')))
      .map((k) => `${k}=${v[k]}`).join('\n') + '\n';
}

// The Noise test-vector text format: blocks of key=value lines.
function parseVectors(text) {
  const out = [];
  let cur = null;
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) {
      if (cur) out.push(cur);
      cur = null;
      continue;
    }
    const at = line.indexOf('=');
    cur = cur || { lines: [] };
    cur.lines.push(line);
    cur[line.slice(0, at)] = line.slice(at + 1);
  }
  if (cur) out.push(cur);
  return out;
}

const te = new TextEncoder();
const ascii = (s) => hex(te.encode(s));

// Fixed inputs: the first key set is the one the Noise test-vector files use (so these
// vectors can be compared with theirs); the second looks like what longhaul sends: a
// prologue of Hello-sized context and payloads of a few dozen bytes.
const FIXED = [
  {
    init_static: '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f',
    resp_static: '0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20',
    gen_init_ephemeral: '202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f',
    gen_resp_ephemeral: '4142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f60',
    variants: [
      { prologue: '', p0: '', p1: '' },
      { prologue: ascii('notsecret'), p0: ascii('test_msg_0'), p1: ascii('test_msg_1') },
    ],
  },
  {
    init_static: 'e61ef9919cde45dd5f82166404bd08e38bceb5dfdfded0a34c8df7ed542214d1',
    resp_static: '4a3acbfdb163dec651dfa3194dece676d437029c62a408b4c5ea9114246e4893',
    gen_init_ephemeral: '893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a',
    gen_resp_ephemeral: 'bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b',
    variants: [
      {
        prologue: ascii('longhaul hello v1: 3 connection ids, 24 parameters, ') +
                  'ff'.repeat(8) + '00'.repeat(64),
        p0: ascii('{"client":"interop","streams":16,"mtu":8952}'),
        p1: ascii('{"accept":true,"profile":"lfn-100g"}'),
      },
    ],
  },
];

function fill(handshake, keys, variant) {
  return {
    handshake,
    init_static: keys.init_static,
    resp_static: keys.resp_static,
    gen_init_ephemeral: keys.gen_init_ephemeral,
    gen_resp_ephemeral: keys.gen_resp_ephemeral,
    prologue: variant.prologue,
    msg_0_payload: variant.p0,
    msg_1_payload: variant.p1,
    msg_2_payload: ascii('yellowsubmarine'),
    msg_3_payload: ascii('submarineyellow'),
  };
}

async function noiseCVectors(random) {
  const noise = await loadNoise('noise-c.wasm');
  const name = 'Noise_IK_25519_AESGCM_SHA256';
  const rnd = (n) => hex(randomBytes(n));
  const inputs = [];
  if (random > 0) {
    for (let i = 0; i < random; ++i) {
      inputs.push(fill(name, {
        init_static: rnd(32), resp_static: rnd(32),
        gen_init_ephemeral: rnd(32), gen_resp_ephemeral: rnd(32),
      }, { prologue: rnd(i % 97), p0: rnd((i * 7) % 130), p1: rnd((i * 13) % 90) }));
      inputs[i].msg_2_payload = rnd(1 + (i % 200));
      inputs[i].msg_3_payload = rnd(1 + ((i * 3) % 200));
    }
  } else {
    for (const keys of FIXED) {
      for (const variant of keys.variants) inputs.push(fill(name, keys, variant));
    }
  }
  let text = random > 0
      ? `# ${random} vectors of random inputs from noise-c (npm noise-c.wasm 0.4.0).\n`
      : HEADER_NOISE_C;
  for (const v of inputs) text += '\n' + format({ ...v, ...runNoiseC(noise, v) });
  process.stdout.write(text);
}

const HEADER_NOISE_C = `# Noise_IK_25519_AESGCM_SHA256 test vectors produced by running noise-c (the Noise
# reference implementation in C, rweather/noise-c, as compiled to WebAssembly in npm
# package noise-c.wasm 0.4.0) with fixed static and ephemeral keys, both roles.
# Regenerate: npm ci --prefix tools/interop && node tools/interop/noise_vectors.mjs noise-c
# msg_0/msg_1: the two handshake messages; handshake_hash: h after them; msg_2/msg_3: the
# payload encrypted with noise-c's split cipher states (initiator to responder, responder
# to initiator; nonce 0, no associated data).
`;

const HEADER_FLYNN = `# Test vectors of Noise_{IK,IKpsk1,NNpsk0}_25519_AESGCM_SHA256, copied verbatim from the
# vectors.txt that flynn/noise (the Go implementation of the Noise protocol framework)
# publishes, as shipped in Debian's golang-github-flynn-noise-dev 1.0.0. Each vector's
# gen_*_ephemeral is the ephemeral private key; msg_2/msg_3 are the payload encrypted
# after Split (initiator to responder, responder to initiator; nonce 0).
# Regenerate: node tools/interop/noise_vectors.mjs flynn \\
#   /usr/share/gocode/src/github.com/flynn/noise/vectors.txt
# (check-flynn replays them on noise-c where noise-c can run them).
`;

function flynnSubset(path) {
  const wanted = new Set(PATTERNS.map((p) => `Noise_${p}_25519_AESGCM_SHA256`));
  const vs = parseVectors(readFileSync(path, 'utf8')).filter((v) => wanted.has(v.handshake));
  let text = HEADER_FLYNN;
  for (const v of vs) text += '\n' + v.lines.join('\n') + '\n';
  process.stdout.write(text);
}

async function checkFlynn(path) {
  const full = await loadNoise('noise-c.wasm');              // AESGCM, no psk modifiers
  const psk = await loadNoise('@richardhopton/noise-c.wasm'); // psk modifiers, ChaChaPoly only
  const supports = (noise, name) => {
    try {
      noise.HandshakeState(name, noise.constants.NOISE_ROLE_INITIATOR).free();
      return true;
    } catch {
      return false;
    }
  };
  const counts = {};
  let bad = 0;
  for (const v of parseVectors(readFileSync(path, 'utf8'))) {
    const m = /^Noise_(IK|IKpsk1|NNpsk0)_25519_(AESGCM|ChaChaPoly)_SHA256$/.exec(v.handshake || '');
    if (!m) continue;
    const c = (counts[v.handshake] = counts[v.handshake] || { agree: 0, differ: 0, skipped: 0 });
    const noise = supports(full, v.handshake) ? full : supports(psk, v.handshake) ? psk : null;
    if (!noise) {
      ++c.skipped;
      continue;
    }
    const got = runNoiseC(noise, v);
    const differs = ['msg_0_ciphertext', 'msg_1_ciphertext', 'msg_2_ciphertext', 'msg_3_ciphertext']
        .filter((k) => got[k] !== v[k]);
    if (differs.length) {
      ++c.differ;
      ++bad;
      process.stderr.write(`${v.handshake}: noise-c differs in ${differs.join(', ')}\n`);
    } else {
      ++c.agree;
    }
  }
  for (const [name, c] of Object.entries(counts)) {
    console.log(`${name}: ${c.agree} agree, ${c.differ} differ, ` +
                `${c.skipped} not supported by noise-c`);
  }
  const agreed = Object.values(counts).reduce((n, c) => n + c.agree, 0);
  if (bad || agreed === 0) process.exit(1);
}

const [mode, arg, arg2] = process.argv.slice(2);
if (mode === 'noise-c') {
  await noiseCVectors(arg === '--random' ? Number(arg2) : 0);
} else if (mode === 'flynn' && arg) {
  flynnSubset(arg);
} else if (mode === 'check-flynn' && arg) {
  await checkFlynn(arg);
} else {
  process.stderr.write('usage: noise_vectors.mjs noise-c [--random N] | flynn VECTORS |' +
                       ' check-flynn VECTORS\n');
  process.exit(2);
}
