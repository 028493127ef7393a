# SPDX-License-Identifier: Apache-2.0
"""A repository signing key, pinned by fingerprint: read it, name its primary keys, decide what to write.

Pure Python on purpose: the host needs no gpg, and nothing is trusted before it is checked. Reads OpenPGP
transferable public keys (RFC 9580), armored or binary, and computes the fingerprint of each primary key:
v4 is SHA-1 over 0x99, a 2-byte length and the key packet body; v5 (LibrePGP) and v6 are SHA-256 over 0x9A
or 0x9B, a 4-byte length and the body. v3 keys (MD5 fingerprints, withdrawn) are refused.

apt reads a Signed-By keyring by its name: ``*.asc`` must hold an armored key, ``*.gpg`` a binary one, and a
mismatched file is ignored (the repository then fails as unsigned). So the format is checked against the
name here, once, for every role.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

ARMOR_BEGIN = b"-----BEGIN PGP PUBLIC KEY BLOCK-----"
ARMOR_END = b"-----END PGP PUBLIC KEY BLOCK-----"
# Packet tags (RFC 9580 section 5): what a public key file may hold besides its primary keys.
TAG_SECRET_KEY, TAG_PUBLIC_KEY = 5, 6
# A repository key file is a few KiB; anything far larger is not one (and is not read further).
MAX_KEY_BYTES = 1 << 20
FINGERPRINT = re.compile(r"^(?:[0-9A-F]{40}|[0-9A-F]{64})$")


class RepoKeyError(ValueError):
    """The key data or a pin is unusable; the message says why."""


@dataclass(frozen=True)
class Key:
    """What was read: the primary keys' fingerprints (uppercase hex, file order) and whether it was armored."""

    fingerprints: tuple[str, ...]
    armored: bool


def normalize_fingerprint(value: str) -> str:
    """'eb69 3b30 ...' or '0xEB69...' -> 'EB693B30...'; refuse anything that is not a full v4 or v6 fingerprint."""
    text = re.sub(r"[\s:]", "", str(value)).upper()
    text = text[2:] if text.startswith("0X") else text
    if not FINGERPRINT.match(text):
        raise RepoKeyError(
            f"fingerprint {value!r} is not accepted; accepted: a full key fingerprint, 40 hex digits (v4) or "
            "64 (v5/v6), spaces allowed (short and long key IDs can be forged)"
        )
    return text


def pin_errors(variable: str, fingerprints: object) -> list[str]:
    """A role's pin list, checked when the role plans (before anything changes): non-empty, full fingerprints."""
    if not isinstance(fingerprints, list) or not fingerprints:
        return [
            f"{variable} is {fingerprints!r}; accepted: a list of the key's full fingerprints, as its publisher "
            "gives them (an empty list would trust whatever key the URL serves)"
        ]
    errors = []
    for value in fingerprints:
        try:
            normalize_fingerprint(str(value))
        except RepoKeyError as problem:
            errors.append(f"{variable}: {problem}")
    return errors


def _crc24(data: bytes) -> int:
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def dearmor(data: bytes) -> bytes:
    """The binary packets of every armored public key block in data, each checked against its CRC24 when given."""
    out = b""
    rest = data
    while ARMOR_BEGIN in rest:
        rest = rest[rest.index(ARMOR_BEGIN) + len(ARMOR_BEGIN) :]
        if ARMOR_END not in rest:
            raise RepoKeyError("an armored key block has no END line (truncated download?)")
        block, rest = rest[: rest.index(ARMOR_END)], rest[rest.index(ARMOR_END) + len(ARMOR_END) :]
        lines = [line.strip() for line in block.decode("ascii", errors="replace").splitlines()]
        # Armor headers (Version:, Comment:) hold a colon, which base64 never does; the CRC line starts with =.
        body = [line for line in lines if line and ":" not in line and not line.startswith("=")]
        checksums = [line[1:] for line in lines if line.startswith("=")]
        try:
            packets = base64.b64decode("".join(body), validate=True)
        except (binascii.Error, ValueError) as error:
            raise RepoKeyError(f"an armored key block is not valid base64 ({error})") from None
        if checksums:
            try:
                expected = int.from_bytes(base64.b64decode(checksums[0], validate=True), "big")
            except (binascii.Error, ValueError):
                raise RepoKeyError(f"an armored key block has a malformed checksum line ={checksums[0]}") from None
            if _crc24(packets) != expected:
                raise RepoKeyError("an armored key block fails its CRC24 checksum (corrupted or truncated)")
        out += packets
    return out


def _packets(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(tag, body) for each OpenPGP packet; a malformed or truncated stream is refused."""
    offset = 0
    while offset < len(data):
        header = data[offset]
        if not header & 0x80:
            raise RepoKeyError(f"byte {offset} is not an OpenPGP packet header (not a key file?)")
        if header & 0x40:  # new format: tag in 6 bits, one to five length octets
            tag = header & 0x3F
            first = data[offset + 1] if offset + 1 < len(data) else 0
            if first < 192:
                length, offset = first, offset + 2
            elif first < 224:
                if offset + 2 >= len(data):
                    raise RepoKeyError("a packet header is truncated")
                length, offset = ((first - 192) << 8) + data[offset + 2] + 192, offset + 3
            elif first == 255:
                length, offset = int.from_bytes(data[offset + 2 : offset + 6], "big"), offset + 6
            else:
                raise RepoKeyError("a packet uses partial body lengths, which a key file never does")
        else:  # old format: tag in 4 bits, length type in 2
            tag, length_type = (header >> 2) & 0x0F, header & 0x03
            if length_type == 3:
                length, offset = len(data) - offset - 1, offset + 1
            else:
                size = (1, 2, 4)[length_type]
                length = int.from_bytes(data[offset + 1 : offset + 1 + size], "big")
                offset += 1 + size
        if offset + length > len(data):
            raise RepoKeyError("a packet runs past the end of the data (truncated download?)")
        yield tag, data[offset : offset + length]
        offset += length


def fingerprint(body: bytes) -> str:
    """Fingerprint of a public key packet body (version in its first octet)."""
    version = body[0] if body else 0
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body, usedforsecurity=False).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise RepoKeyError(f"a primary key has OpenPGP version {version}; accepted: 4, 5 or 6 (v3 keys are obsolete)")


def read_key(data: bytes) -> Key:
    """Parse key data; RepoKeyError when it is not a public key (an HTML page, a secret key, a truncated file)."""
    if len(data) > MAX_KEY_BYTES:
        raise RepoKeyError(f"{len(data)} bytes is too large for a repository key (at most {MAX_KEY_BYTES})")
    armored = data.lstrip().startswith(b"-----BEGIN PGP")
    if armored and ARMOR_BEGIN not in data:
        raise RepoKeyError("the armored block is not a PUBLIC KEY BLOCK")
    packets = dearmor(data) if armored else data
    fingerprints = []
    for tag, body in _packets(packets):
        if tag == TAG_SECRET_KEY:
            raise RepoKeyError("the data holds a SECRET key; a repository keyring takes only the public key")
        if tag == TAG_PUBLIC_KEY:
            fingerprints.append(fingerprint(body))
    if not fingerprints:
        raise RepoKeyError("the data holds no public key")
    return Key(fingerprints=tuple(dict.fromkeys(fingerprints)), armored=armored)


def keyring_error(dest: str) -> str | None:
    """apt reads a Signed-By keyring by its extension: .asc armored, .gpg binary; the path must be absolute."""
    if not dest.startswith("/") or not dest.endswith((".asc", ".gpg")) or re.search(r"\s", dest):
        return (
            f"keyring {dest!r} is not accepted; accepted: an absolute path without spaces ending in .asc "
            "(armored key) or .gpg (binary key), e.g. under /etc/apt/keyrings"
        )
    return None


def format_error(dest: str, key: Key, source: str) -> str | None:
    """A keyring whose content does not match its extension is ignored by apt: say which name to use."""
    if dest.endswith(".asc") and not key.armored:
        return f"the key from {source} is binary, but {dest} ends in .asc; name the keyring *.gpg"
    if dest.endswith(".gpg") and key.armored:
        return f"the key from {source} is ASCII-armored, but {dest} ends in .gpg; name the keyring *.asc"
    return None


def pin_error(key: Key, pins: list[str], source: str) -> str | None:
    """Every primary key in the file must be pinned: an extra key would be trusted too, a missing one is a swap."""
    unpinned = [found for found in key.fingerprints if found not in pins]
    if unpinned:
        return (
            f"the key from {source} has fingerprint(s) {', '.join(key.fingerprints)}; expected (pinned): "
            f"{', '.join(pins)}; not pinned: {', '.join(unpinned)}. The keyring was not written: verify the key "
            "with its publisher and set the fingerprint variable, or fix the URL"
        )
    return None


def checksum_error(data: bytes, checksum: str, source: str) -> str | None:
    """An optional sha256 of the exact file, on top of the fingerprints."""
    if not checksum:
        return None
    found = hashlib.sha256(data).hexdigest()
    if found != checksum:
        return (
            f"the key from {source} did not match the pinned checksum: its sha256 is {found}, expected "
            f"sha256:{checksum}. The keyring was not written"
        )
    return None


def normalize_checksum(value: str) -> str:
    """'' or 'sha256:<64 hex>' or '<64 hex>' -> '' or the hex digits."""
    text = str(value or "").strip().lower()
    text = text[len("sha256:") :] if text.startswith("sha256:") else text
    if text and not re.fullmatch(r"[0-9a-f]{64}", text):
        raise RepoKeyError(f"checksum {value!r} is not accepted; accepted: empty, or sha256: and 64 hex digits")
    return text


def check(data: bytes, dest: str, pins: list[str], checksum: str, source: str) -> Key:
    """Everything a key must pass before it is written to dest; RepoKeyError names the first failure."""
    error = checksum_error(data, checksum, source)
    if error:
        raise RepoKeyError(error)
    try:
        key = read_key(data)
    except RepoKeyError as problem:
        raise RepoKeyError(f"the key from {source} is not usable: {problem}. The keyring was not written") from None
    error = pin_error(key, pins, source) or format_error(dest, key, source)
    if error:
        raise RepoKeyError(error)
    return key


def current(data: bytes | None, dest: str, pins: list[str], checksum: str) -> Key | None:
    """The keyring already in place, when it is exactly what is wanted (so nothing is fetched again)."""
    if data is None:
        return None
    try:
        return check(data, dest, pins, checksum, dest)
    except RepoKeyError:
        return None
