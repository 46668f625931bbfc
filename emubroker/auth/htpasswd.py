"""The password hashes Pulsar's basic authentication accepts: ``$apr1$`` MD5 and DES ``crypt``.

``AuthenticationProviderBasic`` checks a stored hash that starts with ``$apr1`` with Apache's
MD5-crypt variant (commons-codec ``Md5Crypt.apr1Crypt``) and anything else with
``Crypt.crypt(password, first two characters)``, which for a two-character salt is the
traditional DES ``crypt(3)`` (commons-codec ``UnixCrypt``). So bcrypt (``$2y$``) and SHA
(``{SHA}``) lines of an htpasswd file never match, in Pulsar and here.

Both are written from their published descriptions (FreeBSD's MD5-crypt, the V7 ``crypt``
with the FIPS 46 DES tables); the tests check them against OpenSSL and the C library.
Python's ``crypt`` module is deprecated and gone from 3.13, hence our own.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

__all__ = ["apr1_crypt", "check_password", "des_crypt"]

_ITOA64: Final = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SALT_CHARS: Final = frozenset(_ITOA64)


# ---- $apr1$: MD5-crypt with Apache's magic -----------------------------------------------------


def _to64(value: int, count: int) -> str:
    out = []
    for _ in range(count):
        out.append(_ITOA64[value & 0x3F])
        value >>= 6
    return "".join(out)


def apr1_crypt(password: bytes, salt: str) -> str:
    """``$apr1$<salt>$<hash>`` of ``password`` (the salt is cut to 8 characters)."""
    magic = b"$apr1$"
    salt_bytes = salt[:8].encode()
    alternate = hashlib.md5(password + salt_bytes + password).digest()
    ctx = bytearray(password + magic + salt_bytes)
    for length in range(len(password), 0, -16):
        ctx += alternate[: min(length, 16)]
    i = len(password)
    while i:
        ctx += b"\x00" if i & 1 else password[:1]
        i >>= 1
    final = hashlib.md5(ctx).digest()
    for i in range(1000):  # the scheme's fixed 1000 rounds, to slow guessing down
        round_input = password if i & 1 else final
        if i % 3:
            round_input += salt_bytes
        if i % 7:
            round_input += password
        round_input += final if i & 1 else password
        final = hashlib.md5(round_input).digest()
    f = final
    encoded = "".join(
        _to64((f[a] << 16) | (f[b] << 8) | f[c], 4)
        for a, b, c in ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5))
    )
    return f"$apr1${salt[:8]}${encoded}{_to64(f[11], 2)}"


# ---- DES crypt(3) ------------------------------------------------------------------------------

_PC1: Final = (
    57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18, 10, 2, 59, 51, 43, 35, 27, 19, 11, 3,
    60, 52, 44, 36, 63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6, 61, 53, 45, 37,
    29, 21, 13, 5, 28, 20, 12, 4,
)  # fmt: skip
_PC2: Final = (
    14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2,
    41, 52, 31, 37, 47, 55, 30, 40, 51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
)  # fmt: skip
_SHIFTS: Final = (1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1)
_IP: Final = (
    58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4, 62, 54, 46, 38, 30, 22, 14, 6,
    64, 56, 48, 40, 32, 24, 16, 8, 57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3,
    61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7,
)  # fmt: skip
_FP: Final = (
    40, 8, 48, 16, 56, 24, 64, 32, 39, 7, 47, 15, 55, 23, 63, 31, 38, 6, 46, 14, 54, 22, 62, 30,
    37, 5, 45, 13, 53, 21, 61, 29, 36, 4, 44, 12, 52, 20, 60, 28, 35, 3, 43, 11, 51, 19, 59, 27,
    34, 2, 42, 10, 50, 18, 58, 26, 33, 1, 41, 9, 49, 17, 57, 25,
)  # fmt: skip
_E: Final = (
    32, 1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 8, 9, 10, 11, 12, 13, 12, 13, 14, 15, 16, 17,
    16, 17, 18, 19, 20, 21, 20, 21, 22, 23, 24, 25, 24, 25, 26, 27, 28, 29, 28, 29, 30, 31, 32, 1,
)  # fmt: skip
_P: Final = (
    16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10,
    2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25,
)  # fmt: skip
_S: Final = (
    (14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7, 0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11,
     9, 5, 3, 8, 4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0, 15, 12, 8, 2, 4, 9, 1, 7, 5,
     11, 3, 14, 10, 0, 6, 13),
    (15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10, 3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10,
     6, 9, 11, 5, 0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15, 13, 8, 10, 1, 3, 15, 4, 2,
     11, 6, 7, 12, 0, 5, 14, 9),
    (10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8, 13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14,
     12, 11, 15, 1, 13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7, 1, 10, 13, 0, 6, 9, 8, 7,
     4, 15, 14, 3, 11, 5, 2, 12),
    (7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15, 13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12,
     1, 10, 14, 9, 10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4, 3, 15, 0, 6, 10, 1, 13, 8,
     9, 4, 5, 11, 12, 7, 2, 14),
    (2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9, 14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10,
     3, 9, 8, 6, 4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14, 11, 8, 12, 7, 1, 14, 2, 13,
     6, 15, 0, 9, 10, 4, 5, 3),
    (12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11, 10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14,
     0, 11, 3, 8, 9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6, 4, 3, 2, 12, 9, 5, 15, 10,
     11, 14, 1, 7, 6, 0, 8, 13),
    (4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1, 13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12,
     2, 15, 8, 6, 1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2, 6, 11, 13, 8, 1, 4, 10, 7,
     9, 5, 0, 15, 14, 2, 3, 12),
    (13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7, 1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11,
     0, 14, 9, 2, 7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8, 2, 1, 14, 7, 4, 10, 8, 13,
     15, 12, 9, 0, 3, 5, 6, 11),
)  # fmt: skip


def _subkeys(key_bits: list[int]) -> list[list[int]]:
    cd = [key_bits[i - 1] for i in _PC1]
    c, d = cd[:28], cd[28:]
    keys = []
    for shift in _SHIFTS:
        c, d = c[shift:] + c[:shift], d[shift:] + d[:shift]
        cd = c + d
        keys.append([cd[i - 1] for i in _PC2])
    return keys


def _encrypt(block: list[int], keys: list[list[int]], expansion: list[int]) -> list[int]:
    bits = [block[i - 1] for i in _IP]
    left, right = bits[:32], bits[32:]
    for key in keys:
        mixed = [right[e - 1] ^ k for e, k in zip(expansion, key, strict=True)]
        f = []
        for box in range(8):
            six = mixed[6 * box : 6 * box + 6]
            row = (six[0] << 1) | six[5]
            col = (six[1] << 3) | (six[2] << 2) | (six[3] << 1) | six[4]
            value = _S[box][16 * row + col]
            f += [(value >> shift) & 1 for shift in (3, 2, 1, 0)]
        left, right = right, [a ^ f[p - 1] for a, p in zip(left, _P, strict=True)]
    out = right + left  # the last round does not swap
    return [out[i - 1] for i in _FP]


def des_crypt(password: bytes, salt: str) -> str:
    """Traditional ``crypt(3)``: 13 characters, the 2-character salt first.

    Raises:
        ValueError: The salt is not two characters of ``[./0-9A-Za-z]``.
    """
    if len(salt) != 2 or not set(salt) <= _SALT_CHARS:
        raise ValueError(f"invalid salt value {salt!r}")
    expansion = list(_E)
    for i, char in enumerate(salt):
        value = _ITOA64.index(char)
        for j in range(6):
            if (value >> j) & 1:  # each salt bit swaps two outputs of the expansion
                a, b = 6 * i + j, 6 * i + j + 24
                expansion[a], expansion[b] = expansion[b], expansion[a]
    key_bits: list[int] = []
    for byte in password[:8].ljust(8, b"\x00"):
        key_bits += [(byte >> (6 - j)) & 1 for j in range(7)] + [0]  # 7 bits, then parity
    keys = _subkeys(key_bits)
    block = [0] * 64
    for _ in range(25):
        block = _encrypt(block, keys, expansion)
    bits = [*block, 0, 0]
    chars = [_ITOA64[int("".join(map(str, bits[6 * i : 6 * i + 6])), 2)] for i in range(11)]
    return salt + "".join(chars)


def check_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches an htpasswd hash the way Pulsar compares them."""
    secret = password.encode()
    if stored.startswith("$apr1"):
        parts = stored.split("$")
        if len(parts) != 4:
            return False
        computed = apr1_crypt(secret, parts[2])
    else:
        try:
            computed = des_crypt(secret, stored[:2])
        except ValueError:
            return False
    return hmac.compare_digest(computed.encode(), stored.encode())
