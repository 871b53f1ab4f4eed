#!/usr/bin/env python3
"""Cross-checks tests/vectors/golden_handshake.txt without wgnet.

Recomputes every block's initiation, response, transport keys and first keepalive from
its inputs, following the WireGuard paper (section 5.4) step by step: BLAKE2s, keyed
BLAKE2s and HMAC-BLAKE2s from Python's hashlib and hmac; X25519 and ChaCha20-Poly1305
from the `cryptography` package (Python's standard library has neither).

Usage: python3 tests/vectors/golden_handshake_check.py [path/to/golden_handshake.txt]
Exit status 0 when every value matches, 1 otherwise, 77 without the `cryptography`
package (ctest reports that as skipped; scripts/test.sh fails on it under CI=true).
"""

import hashlib
import hmac
import pathlib
import struct
import sys

try:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
except ImportError as e:  # ctest's SKIP_RETURN_CODE: reported as skipped, not passed
    print(f"SKIPPED: {e} (install python3-cryptography)")
    sys.exit(77)

CONSTRUCTION = b"Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"
IDENTIFIER = b"WireGuard v1 zx2c4 Jason@zx2c4.com"
LABEL_MAC1 = b"mac1----"


# --- primitives (paper, section 5.4) ------------------------------------------------------

def HASH(*parts):
    h = hashlib.blake2s(digest_size=32)
    for p in parts:
        h.update(p)
    return h.digest()


def MAC(key, data):
    return hashlib.blake2s(data, key=key, digest_size=16).digest()


def HMAC(key, data):
    return hmac.new(key, data, hashlib.blake2s).digest()


def KDF(n, key, data):
    t0 = HMAC(key, data)
    out, prev = [], b""
    for i in range(1, n + 1):
        prev = HMAC(t0, prev + bytes([i]))
        out.append(prev)
    return out


def DH(private, public):
    return X25519PrivateKey.from_private_bytes(private).exchange(
        X25519PublicKey.from_public_bytes(public))


def DH_PUBKEY(private):
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes(
        Encoding.Raw, PublicFormat.Raw)


def AEAD(key, counter, plaintext, ad):
    nonce = b"\x00" * 4 + struct.pack("<Q", counter)
    return ChaCha20Poly1305(key).encrypt(nonce, plaintext, ad)


# --- the handshake ------------------------------------------------------------------------

def handshake(v):
    s_priv_i, s_priv_r = v["initiator_static_private"], v["responder_static_private"]
    e_priv_i, e_priv_r = v["initiator_ephemeral_private"], v["responder_ephemeral_private"]
    q = v["preshared_key"]
    timestamp = v["timestamp"]
    i_index, r_index = v["initiator_index"], v["responder_index"]
    s_pub_i, s_pub_r = DH_PUBKEY(s_priv_i), DH_PUBKEY(s_priv_r)
    out = {"initiator_static_public": s_pub_i, "responder_static_public": s_pub_r}

    # Initiator -> responder.
    c = HASH(CONSTRUCTION)
    h = HASH(c, IDENTIFIER)
    h = HASH(h, s_pub_r)
    e_pub_i = DH_PUBKEY(e_priv_i)
    (c,) = KDF(1, c, e_pub_i)
    h = HASH(h, e_pub_i)
    c, k = KDF(2, c, DH(e_priv_i, s_pub_r))
    enc_static = AEAD(k, 0, s_pub_i, h)
    h = HASH(h, enc_static)
    c, k = KDF(2, c, DH(s_priv_i, s_pub_r))
    enc_timestamp = AEAD(k, 0, timestamp, h)
    h = HASH(h, enc_timestamp)
    msg = b"\x01\x00\x00\x00" + i_index + e_pub_i + enc_static + enc_timestamp
    msg += MAC(HASH(LABEL_MAC1, s_pub_r), msg)
    msg += b"\x00" * 16  # mac2: no cookie
    out["initiation"] = msg

    # Responder -> initiator.
    e_pub_r = DH_PUBKEY(e_priv_r)
    (c,) = KDF(1, c, e_pub_r)
    h = HASH(h, e_pub_r)
    (c,) = KDF(1, c, DH(e_priv_r, e_pub_i))
    (c,) = KDF(1, c, DH(e_priv_r, s_pub_i))
    c, tau, k = KDF(3, c, q)
    h = HASH(h, tau)
    enc_nothing = AEAD(k, 0, b"", h)
    h = HASH(h, enc_nothing)
    msg = b"\x02\x00\x00\x00" + r_index + i_index + e_pub_r + enc_nothing
    msg += MAC(HASH(LABEL_MAC1, s_pub_i), msg)
    msg += b"\x00" * 16
    out["response"] = msg

    # Transport keys, and the initiator's first message: an empty keepalive, counter 0.
    t_send_i, t_recv_i = KDF(2, c, b"")
    out["initiator_send"] = t_send_i
    out["initiator_receive"] = t_recv_i
    out["initiator_keepalive"] = (b"\x04\x00\x00\x00" + r_index + struct.pack("<Q", 0) +
                                  AEAD(t_send_i, 0, b"", b""))
    return out


# --- the vector file (format: see tests/vectors/blake2s.txt) ------------------------------

def load_blocks(path):
    blocks, cur, last = [], {}, None
    for raw in pathlib.Path(path).read_text().splitlines():
        line = raw.strip()
        if not line:
            if cur:
                blocks.append(cur)
            cur, last = {}, None
        elif line.startswith("#"):
            continue
        elif raw[0] in " \t":
            cur[last] += line
        else:
            name, value = (s.strip() for s in line.split("=", 1))
            cur[name], last = value, name
    if cur:
        blocks.append(cur)
    return blocks


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).with_name(
        "golden_handshake.txt")
    ok, checked = True, 0
    for n, block in enumerate(load_blocks(path), 1):
        if block.get("kind") != "handshake":
            continue
        inputs = {k: bytes.fromhex(v) for k, v in block.items() if k != "kind"}
        for name, value in handshake(inputs).items():
            checked += 1
            if value.hex() != block[name]:
                ok = False
                print(f"block {n}: {name} differs\n  file:     {block[name]}\n"
                      f"  computed: {value.hex()}")
    print(f"{checked} values in {path}: {'all match' if ok else 'MISMATCH'}")
    return 0 if ok and checked else 1


if __name__ == "__main__":
    sys.exit(main())
