# SPDX-License-Identifier: Apache-2.0
"""repo_key: OpenPGP fingerprints in pure Python, and the module through real ``ansible``.

Keys are throwaway ones generated at test time (tests/fixtures/aptrepo.py); their fingerprints come from gpg,
so the Python parser is checked against gpg itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from typing import Any

import pytest

from gpufabric.collection import module_utils
from tests.fixtures import ansible_module, aptrepo

rk = module_utils("repo_key")
pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="needs gpg (gnupg) to make test keys")


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    binary, fpr = aptrepo.export_key("run")
    armored = aptrepo.export_key("run", armored=True)[0]
    other, other_fpr = aptrepo.export_key("other")
    secret = aptrepo._gpg(
        aptrepo._key("run"), "--pinentry-mode", "loopback", "--passphrase", "", "--export-secret-keys", fpr
    ).stdout
    return {"binary": binary, "armored": armored, "fpr": fpr, "other": other, "other_fpr": other_fpr, "secret": secret}


# --- the parser -----------------------------------------------------------------------------------------------


def test_fingerprint_of_binary_and_armored_keys_matches_gpg(keys):
    assert rk.read_key(keys["binary"]) == rk.Key(fingerprints=(keys["fpr"],), armored=False)
    assert rk.read_key(keys["armored"]) == rk.Key(fingerprints=(keys["fpr"],), armored=True)


def test_a_file_with_two_keys_names_both(keys):
    assert rk.read_key(keys["binary"] + keys["other"]).fingerprints == (keys["fpr"], keys["other_fpr"])


def test_a_file_of_two_keys_is_accepted_when_both_are_pinned_and_refused_when_one_is_not(keys):
    """A publisher's key file may hold two primary keys during a rotation (Google's Artifact Registry file did:
    kubernetes/release #3102): pinning both accepts it; pinning one names the other and writes nothing."""
    both = keys["binary"] + keys["other"]
    assert rk.check(both, "/k/r.gpg", [keys["fpr"], keys["other_fpr"]], "", "https://example/key").fingerprints == (
        keys["fpr"],
        keys["other_fpr"],
    )
    with pytest.raises(rk.RepoKeyError, match=f"not pinned: {keys['other_fpr']}. The keyring was not written"):
        rk.check(both, "/k/r.gpg", [keys["fpr"]], "", "https://example/key")


def test_v6_fingerprint_is_sha256_over_0x9b_and_a_4_byte_length():
    body = bytes([6]) + b"\x00" * 40
    assert rk.fingerprint(body) == hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"<html>captive portal</html>", "is not an OpenPGP packet header"),
        (b"", "holds no public key"),
        (bytes([0x99, 0x00, 0x05, 3, 0, 0, 0, 0]), "OpenPGP version 3"),
        (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQ==\n", "has no END line"),
        (b"-----BEGIN PGP SIGNATURE-----\nabc\n-----END PGP SIGNATURE-----\n", "not a PUBLIC KEY BLOCK"),
    ],
    ids=["html", "empty", "v3", "no-end", "signature"],
)
def test_what_is_not_a_public_key_is_refused(data, error):
    with pytest.raises(rk.RepoKeyError, match=error):
        rk.read_key(data)


def test_truncated_corrupted_and_secret_keys_are_refused(keys):
    with pytest.raises(rk.RepoKeyError, match="runs past the end"):
        rk.read_key(keys["binary"][:-10])
    with pytest.raises(rk.RepoKeyError, match="CRC24"):
        rk.read_key(_flip_armored(keys["armored"]))
    with pytest.raises(rk.RepoKeyError, match="SECRET key"):
        rk.read_key(keys["secret"])


def _flip_armored(armored: bytes) -> bytes:
    """Change one base64 character of the body, keeping the CRC line: the checksum must catch it."""
    lines = armored.split(b"\n")
    index = next(i for i, line in enumerate(lines) if len(line) > 40)
    line = lines[index]
    lines[index] = line[:10] + (b"A" if line[10:11] != b"A" else b"B") + line[11:]
    return b"\n".join(lines)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC", "EB693B3035CD5710E231E123A4B469963BF863CC"),
        ("0xeb693b3035cd5710e231e123a4b469963bf863cc", "EB693B3035CD5710E231E123A4B469963BF863CC"),
    ],
)
def test_fingerprints_are_normalised(value, expected):
    assert rk.normalize_fingerprint(value) == expected


@pytest.mark.parametrize("value", ["3BF863CC", "A4B469963BF863CC", "", "not hex" * 6])
def test_short_key_ids_are_not_pins(value):
    with pytest.raises(rk.RepoKeyError, match="accepted: a full key fingerprint"):
        rk.normalize_fingerprint(value)


def test_check_names_source_expected_and_found(keys):
    with pytest.raises(rk.RepoKeyError) as caught:
        rk.check(keys["binary"], "/k/r.gpg", ["0" * 40], "", "https://example/key")
    message = str(caught.value)
    assert "https://example/key" in message and "0" * 40 in message and keys["fpr"] in message
    assert "was not written" in message


@pytest.mark.parametrize(
    ("dest", "kind", "error"),
    [
        ("/k/r.asc", "binary", "is binary, but /k/r.asc ends in .asc; name the keyring *.gpg"),
        ("/k/r.gpg", "armored", "is ASCII-armored, but /k/r.gpg ends in .gpg; name the keyring *.asc"),
    ],
)
def test_keyring_name_must_match_the_format(keys, dest, kind, error):
    with pytest.raises(rk.RepoKeyError, match=re.escape(error)):
        rk.check(keys[kind], dest, [keys["fpr"]], "", "src")


@pytest.mark.parametrize("dest", ["relative.gpg", "/etc/apt/keyrings/x.key", "/etc/apt/key rings/x.gpg"])
def test_keyring_paths_apt_cannot_read_are_refused(dest):
    assert "is not accepted; accepted: an absolute path" in rk.keyring_error(dest)


def test_checksum_is_checked_on_top(keys):
    good = hashlib.sha256(keys["binary"]).hexdigest()
    assert rk.check(keys["binary"], "/k/r.gpg", [keys["fpr"]], good, "src").fingerprints == (keys["fpr"],)
    with pytest.raises(rk.RepoKeyError, match=r"did not match the pinned checksum: its sha256 is [0-9a-f]{64}"):
        rk.check(keys["binary"], "/k/r.gpg", [keys["fpr"]], "0" * 64, "src")


# --- the module through ansible -------------------------------------------------------------------------------


def ansible(ansible_env: dict[str, str], args: dict[str, Any], *extra: str) -> dict[str, Any]:
    return ansible_module.run(ansible_env, "repo_key", "-a", json.dumps(args), *extra)


def test_install_then_no_refetch(tmp_path, ansible_env, keys):
    served = tmp_path / "served.gpg"
    served.write_bytes(keys["binary"])
    dest = tmp_path / "keyrings" / "repo.gpg"
    args = {"url": served.as_uri(), "dest": str(dest), "fingerprints": [keys["fpr"]]}

    checked = ansible(ansible_env, args, "--check", "--diff")
    assert checked["changed"] is True and checked["fetched"] is True and not dest.exists()
    assert keys["fpr"] in json.dumps(checked["diff"])

    first = ansible(ansible_env, args)
    assert first["changed"] is True and first["fingerprints"] == [keys["fpr"]]
    assert dest.read_bytes() == keys["binary"] and oct(dest.stat().st_mode & 0o777) == "0o644"

    served.write_bytes(b"<html>the URL now serves something else</html>")  # proves the second run fetches nothing
    again = ansible(ansible_env, args)
    assert again["changed"] is False and again["fetched"] is False


def test_wrong_fingerprint_fails_before_the_keyring_is_written(tmp_path, ansible_env, keys):
    served = tmp_path / "served.asc"
    served.write_bytes(keys["armored"])
    dest = tmp_path / "repo.asc"
    for extra in ((), ("--check",)):
        failed = ansible(ansible_env, {"url": served.as_uri(), "dest": str(dest), "fingerprints": ["A" * 40]}, *extra)
        assert failed["failed"] is True and not dest.exists()
        assert served.as_uri() in failed["msg"] and "A" * 40 in failed["msg"] and keys["fpr"] in failed["msg"]


def test_a_changed_pin_replaces_the_keyring(tmp_path, ansible_env, keys):
    dest = tmp_path / "repo.gpg"
    dest.write_bytes(keys["other"])
    content = base64.b64encode(keys["binary"]).decode()
    result = ansible(ansible_env, {"content_base64": content, "dest": str(dest), "fingerprints": [keys["fpr"]]})
    assert result["changed"] is True and dest.read_bytes() == keys["binary"]


def test_src_on_the_controller_and_inline_content(tmp_path, ansible_env, keys):
    src = tmp_path / "mirror.gpg"
    src.write_bytes(keys["binary"])
    copied = ansible(ansible_env, {"src": str(src), "dest": str(tmp_path / "a.gpg"), "fingerprints": [keys["fpr"]]})
    assert copied["changed"] is True and (tmp_path / "a.gpg").read_bytes() == keys["binary"]
    inline = {"content": keys["armored"].decode(), "dest": str(tmp_path / "b.asc"), "fingerprints": [keys["fpr"]]}
    assert ansible(ansible_env, inline)["changed"] is True
    assert rk.read_key((tmp_path / "b.asc").read_bytes()).fingerprints == (keys["fpr"],)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"fingerprints": [], "fingerprints_from": "role_key_fingerprints"}, "role_key_fingerprints is empty"),
        ({"fingerprints": ["3BF863CC"]}, "fingerprint '3BF863CC' is not accepted"),
        ({"dest": "{tmp}/r.asc"}, "is binary, but"),
    ],
    ids=["no-pin", "short-id", "format"],
)
def test_bad_arguments_fail_with_one_message(tmp_path, ansible_env, keys, args, error):
    served = tmp_path / "k.gpg"
    served.write_bytes(keys["binary"])
    base = {"url": served.as_uri(), "dest": str(tmp_path / "r.gpg"), "fingerprints": [keys["fpr"]]}
    merged = {
        **base,
        **{
            key: value.replace("{tmp}", str(tmp_path)) if isinstance(value, str) else value
            for key, value in args.items()
        },
    }
    failed = ansible(ansible_env, merged)
    assert failed["failed"] is True and error in failed["msg"]
    assert not (tmp_path / "r.gpg").exists() and not (tmp_path / "r.asc").exists()
