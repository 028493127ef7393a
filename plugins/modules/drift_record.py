#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: drift_record
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Record the state of what a role manages, for the fast drift check
description:
  - Reads the live state of the items a role manages (files, small contents such as sysctls, packages, systemd
    units, kernel modules) and stores it, with the digest of the host's plan, as the role's entry in the host's
    record file. M(gpufabric.cluster.drift_check) later reads the same items through the same code and reports
    what differs (docs/drift.md, "The fast path").
  - A role calls it last, after it converged, so the record is the desired state as the role left it.
  - Changes only the record file, written atomically, and only when the role's entry differs; other roles'
    entries are kept. An unreadable record file is replaced, with a warning.
options:
  role:
    description: The role whose entry this is.
    type: str
    required: true
  plan:
    description: The host's plan (C(gpufabric_plan)); its digest is recorded, never the plan itself.
    type: dict
    required: true
  files:
    description: Absolute paths of files the role manages; their sha256, mode, owner and group are recorded.
    type: list
    elements: path
    default: []
  contents:
    description:
      - Absolute paths of small text files whose value the role sets (a sysctl under C(/proc/sys), a SR-IOV
        C(sriov_numvfs)); their text is recorded (4 KiB at most).
    type: list
    elements: path
    default: []
  packages:
    description: Packages the role installs; their version and hold (dpkg) are recorded.
    type: list
    elements: str
    default: []
  units:
    description: systemd units the role enables or starts; their unit file state and active state are recorded.
    type: list
    elements: str
    default: []
  kernel_modules:
    description: Kernel modules the role loads; whether each is loaded is recorded.
    type: list
    elements: str
    default: []
  path:
    description: The record file.
    type: path
    default: /var/lib/gpufabric/drift-record.json
attributes:
  check_mode:
    description: Reads the state and reports whether the entry would change; writes nothing.
    support: full
  diff_mode:
    description: Shows the role's entry before and after.
    support: full
"""

EXAMPLES = r"""
- name: Record what nccl_env manages, for the fast drift check
  gpufabric.cluster.drift_record:
    role: nccl_env
    plan: "{{ gpufabric_plan }}"
    files: [/etc/nccl.conf, /etc/profile.d/gpufabric-nccl.sh]
"""

RETURN = r"""
entry:
  description: The role's entry as recorded (or, in check mode, as it would be).
  returned: success
  type: dict
  sample: {"plan": "3f5a...", "state": {"files": {"/etc/nccl.conf": {"sha256": "9b1c...", "mode": "0644",
           "owner": "root", "group": "root"}}}}
path:
  description: The record file.
  returned: always
  type: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.cluster.plugins.module_utils.drift_state import (
    KINDS,
    DriftStateError,
    dump_record,
    load_record,
    plan_digest,
    read_state,
    role_entry,
)

PATH_KINDS = ("files", "contents")


def write_record(module: AnsibleModule, path: str, text: str) -> None:
    """The whole file at once: a temporary file beside it, renamed over it."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o755, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".drift-record.")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.chmod(temporary, 0o644)
    module.atomic_move(temporary, path)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "role": {"type": "str", "required": True},
            "plan": {"type": "dict", "required": True},
            "files": {"type": "list", "elements": "path", "default": []},
            "contents": {"type": "list", "elements": "path", "default": []},
            "packages": {"type": "list", "elements": "str", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "kernel_modules": {"type": "list", "elements": "str", "default": []},
            "path": {"type": "path", "default": "/var/lib/gpufabric/drift-record.json"},
        },
        supports_check_mode=True,
    )
    params = module.params
    path, role = params["path"], params["role"]
    for kind in PATH_KINDS:
        relative = [item for item in params[kind] if not os.path.isabs(item)]
        if relative:
            module.fail_json(msg=f"{kind}: {relative[0]!r} is not an absolute path", path=path)
    try:
        state = read_state({kind: params[kind] for kind in KINDS}, lambda argv: module.run_command(argv))
    except DriftStateError as problem:
        module.fail_json(msg=f"{role}: {problem}", path=path)
    entry = role_entry(plan_digest(params["plan"]), state)
    record, problem = load_record(path)
    if problem and os.path.exists(path):
        module.warn(f"{problem}; it is written anew")
    before = record["roles"].get(role)
    changed = before != entry
    result = {"changed": changed, "entry": entry, "path": path}
    if module._diff:
        header = f"{path} (role {role})"
        result["diff"] = {
            "before_header": header,
            "after_header": header,
            "before": dump_record(before) if before is not None else "",
            "after": dump_record(entry),
        }
    if changed and not module.check_mode:
        record["roles"][role] = entry
        try:
            write_record(module, path, dump_record(record))
        except OSError as error:
            module.fail_json(msg=f"cannot write {path}: {error.strerror}", path=path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
