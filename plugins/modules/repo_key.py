#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: repo_key
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Install a package repository's signing key, pinned by fingerprint, into its own keyring
description:
  - Installs one repository signing key into the keyring file O(dest) that the repository's source names
    (apt C(Signed-By), dnf C(gpgkey)). The key comes from a URL on the host (O(url)), a file on the controller
    (O(src)) or inline (O(content)).
  - The key is trusted only when every primary key in it has a fingerprint listed in O(fingerprints) (and,
    when O(checksum) is set, the file has that sha256). Fingerprints are computed in Python from the OpenPGP
    key packets, armored or binary, v4, v5 or v6; no gpg is needed on the host. A mismatch, a secret key, a
    truncated download or a page that is not a key fails with one message naming the source, the expected and
    the found fingerprints, and nothing is written.
  - When O(dest) already holds exactly a pinned key, nothing is fetched and nothing changes; a keyring is
    written only when it is missing or holds another key, and then atomically.
  - apt reads a keyring by its name, C(*.asc) armored and C(*.gpg) binary, and ignores a file whose content
    does not match; such a mismatch fails before anything is written, saying which name to use.
  - Check mode fetches and verifies the key too (a read-only request) and reports whether the keyring would
    change; when the URL cannot be reached in check mode it reports the change it would make and warns.
    With diff, the keyring's fingerprints before and after are shown.
options:
  dest:
    description:
      - The keyring file, an absolute path ending in C(.asc) (armored key) or C(.gpg) (binary key). Its
        directory is created (mode 0755) when missing.
    type: path
    required: true
  url:
    description:
      - URL the host fetches the key from (C(https://), or C(file://) for a file already on the host). Fetched
        only when O(dest) does not already hold a pinned key.
    type: str
  src:
    description:
      - Key file on the controller (found like the copy module's C(src), also under the role's C(files/)).
        The action plugin reads it and passes it as O(content_base64).
    type: path
  content:
    description: The key itself, ASCII-armored.
    type: str
  content_base64:
    description: The key's bytes, base64-encoded (binary keys given inline; set by the action plugin for O(src)).
    type: str
  fingerprints:
    description:
      - The fingerprints the key may have, each a full primary key fingerprint (40 hex digits for v4, 64 for
        v5 and v6; spaces and a C(0x) prefix are ignored). Every primary key in the file must be one of them.
        List more than one while a publisher rotates keys.
    type: list
    elements: str
    required: true
  fingerprints_from:
    description:
      - Where O(fingerprints) and O(checksum) come from (say the role variable), named in error messages so
        that they say what to set.
    type: str
    default: the fingerprints option
  checksum:
    description:
      - Optional sha256 of the exact key file (C(sha256:) and 64 hex digits), checked on top of the fingerprints.
    type: str
    default: ""
  timeout:
    description: Seconds to wait for the URL.
    type: int
    default: 30
  validate_certs:
    description: Whether an https URL's certificate must be valid.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.files
attributes:
  check_mode:
    description: Fetches and verifies the key, writes nothing, and reports whether the keyring would change.
    support: full
  diff_mode:
    description: Shows the keyring's format and fingerprints before and after.
    support: full
"""

EXAMPLES = r"""
- name: Install the CUDA repository key, pinned by the fingerprint NVIDIA publishes
  gpufabric.cluster.repo_key:
    url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
    dest: /etc/apt/keyrings/gpufabric-cuda.asc
    fingerprints: ["EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC"]
    owner: root
    group: root
    mode: "0644"

- name: Install a mirror's key from the controller
  gpufabric.cluster.repo_key:
    src: keys/mirror-archive-keyring.gpg
    dest: /etc/apt/keyrings/mirror.gpg
    fingerprints: ["0123456789ABCDEF0123456789ABCDEF01234567"]
"""

RETURN = r"""
fingerprints:
  description: The primary key fingerprints of the key now in (or, in check mode, bound for) O(dest).
  returned: success
  type: list
  elements: str
  sample: ["EB693B3035CD5710E231E123A4B469963BF863CC"]
armored:
  description: Whether the key is ASCII-armored.
  returned: success
  type: bool
fetched:
  description: Whether the key was fetched from O(url) in this run (false when the keyring already held it).
  returned: always
  type: bool
dest:
  description: The keyring file.
  returned: always
  type: str
"""

import base64
import binascii
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.gpufabric.cluster.plugins.module_utils.repo_key import (
    MAX_KEY_BYTES,
    Key,
    RepoKeyError,
    check,
    current,
    keyring_error,
    normalize_checksum,
    normalize_fingerprint,
    read_key,
)


def _describe(key: Key | None, dest: str) -> str:
    if key is None:
        return ""
    kind = "armored" if key.armored else "binary"
    return f"{dest}: {kind} key, fingerprints {', '.join(key.fingerprints)}\n"


def _read(path: str) -> bytes | None:
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as handle:
        return handle.read(MAX_KEY_BYTES + 1)


def _fetch(module: AnsibleModule, url: str) -> bytes:
    params = module.params
    response = open_url(url, timeout=params["timeout"], validate_certs=params["validate_certs"], http_agent="gpufabric")
    return bytes(response.read(MAX_KEY_BYTES + 1))


def _source(module: AnsibleModule) -> tuple[str, bytes | None]:
    """Where the key comes from (for messages) and, unless it is a URL, its bytes."""
    params = module.params
    if params["url"]:
        return params["url"], None
    if params["content_base64"]:
        try:
            data = base64.b64decode(params["content_base64"], validate=True)
        except (binascii.Error, ValueError):
            module.fail_json(msg="content_base64 is not valid base64")
        return params["src"] or "content_base64", data
    return "the inline content", str(params["content"]).encode()


def _write(module: AnsibleModule, dest: str, data: bytes) -> None:
    directory = os.path.dirname(dest)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".repo_key-")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.chmod(temporary, 0o644)
    module.atomic_move(temporary, dest)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "url": {"type": "str"},
            "src": {"type": "path"},
            "content": {"type": "str"},
            "content_base64": {"type": "str"},
            "fingerprints": {"type": "list", "elements": "str", "required": True},
            "fingerprints_from": {"type": "str", "default": "the fingerprints option"},
            "checksum": {"type": "str", "default": ""},
            "timeout": {"type": "int", "default": 30},
            "validate_certs": {"type": "bool", "default": True},
        },
        mutually_exclusive=[("url", "content", "content_base64")],
        required_one_of=[("url", "content", "content_base64")],
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    dest = params["dest"]
    error = keyring_error(dest)
    if error:
        module.fail_json(msg=error, dest=dest, fetched=False)
    pinned_by = params["fingerprints_from"]
    try:
        pins = [normalize_fingerprint(value) for value in params["fingerprints"]]
        checksum = normalize_checksum(params["checksum"])
    except RepoKeyError as problem:
        module.fail_json(msg=f"{pinned_by}: {problem}", dest=dest, fetched=False)
    if not pins:
        module.fail_json(
            msg=f"{pinned_by} is empty: the key for {dest} would be trusted on first use; set the fingerprint(s) "
            "its publisher gives, after verifying them",
            dest=dest,
            fetched=False,
        )
    existing = _read(dest)
    have = current(existing, dest, pins, checksum)
    file_args = module.load_file_common_arguments(params, path=dest)
    if file_args.get("mode") is None:
        file_args["mode"] = "0644"
    if have is not None:
        changed = module.set_fs_attributes_if_different(file_args, False)
        module.exit_json(
            changed=changed, dest=dest, fingerprints=list(have.fingerprints), armored=have.armored, fetched=False
        )

    source, data = _source(module)
    fetched = False
    if data is None:
        try:
            data = _fetch(module, source)
            fetched = True
        except Exception as problem:
            if module.check_mode:
                module.warn(f"check mode could not fetch {source} to verify it ({problem}); the keyring would change")
                module.exit_json(changed=True, dest=dest, fetched=False)
            module.fail_json(
                msg=f"could not fetch the key for {dest} from {source}: {problem}", dest=dest, fetched=False
            )
    try:
        key = check(data, dest, pins, checksum, source)
    except RepoKeyError as problem:
        module.fail_json(msg=f"{problem} ({pinned_by})", dest=dest, url=params["url"], expected=pins, fetched=fetched)
    before = None
    if existing is not None:
        try:
            before = read_key(existing)
        except RepoKeyError:
            before = None
    diff = {
        "before_header": dest,
        "after_header": dest,
        "before": _describe(before, dest) or ("" if existing is None else f"{dest}: holds no usable key\n"),
        "after": _describe(key, dest),
    }
    if not module.check_mode:
        _write(module, dest, data)
        module.set_fs_attributes_if_different(file_args, True)
    module.exit_json(
        changed=True,
        dest=dest,
        fingerprints=list(key.fingerprints),
        armored=key.armored,
        fetched=fetched,
        diff=diff,
    )


if __name__ == "__main__":
    main()
