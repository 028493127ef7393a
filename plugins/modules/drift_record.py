#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: drift_record
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Record the state of what the roles manage, for the fast drift check
description:
  - Reads the live state of the items each role manages (files, small contents such as sysctls, packages,
    systemd units, kernel modules) and stores it, with the digest of the host's plan, as that role's entry in
    the host's record file. M(gpufabric.cluster.drift_check) later reads the same items through the same code
    and reports what differs (docs/drift.md, "The fast path").
  - playbooks/site.yml calls it once per host after every role of the plan ran and the handlers ran, so the
    record is the desired state as the roles left it. Entries of roles neither given nor in O(keep) are removed.
  - Changes only the record file, written atomically, and only when an entry differs. An unreadable record
    file is replaced, with a warning.
options:
  roles:
    description:
      - Each role's items. An item list may be left out; a role that manages nothing on the host is given with
        its name only, so that its entry says so. A role given twice counts as its last entry.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The role.
        type: str
        required: true
      files:
        description:
          - Absolute paths of files the role manages; their sha256, mode, owner and group are recorded, and the text
            of one up to 64 KiB that is UTF-8 and readable by every user (so the drift report shows an edit, and
            the record reveals nothing the file does not).
        type: list
        elements: path
      contents:
        description:
          - Absolute paths of small text files whose value the role sets (a sysctl under C(/proc/sys), a SR-IOV
            C(sriov_numvfs)); their text is recorded (4 KiB at most).
        type: list
        elements: path
      packages:
        description: Packages the role installs; their version and hold (dpkg) are recorded.
        type: list
        elements: str
      units:
        description: systemd units the role enables or starts; their unit file state and active state are recorded.
        type: list
        elements: str
      kernel_modules:
        description: Kernel modules the role loads; whether each is loaded is recorded.
        type: list
        elements: str
  plan:
    description: The host's plan (C(gpufabric_plan)); its digest is recorded, never the plan itself.
    type: dict
    required: true
  settings:
    description:
      - The digest of each role variable the inventory or the command line sets (name -> sha256 of its value as
        canonical JSON), as playbooks/tasks/plan.yml computes them on the controller; only digests reach the host.
      - Each is recorded in the entry of the role its name starts with (the longest role name given), so a
        changed, added or removed setting is drift even when the plan did not move.
    type: dict
    default: {}
  keep:
    description:
      - Roles whose entries stay as recorded, such as the roles of the plan that a run narrowed by C(--tags) or
        C(--skip-tags) did not run. A role also given in O(roles) is recorded anew; one not in the record stays absent.
    type: list
    elements: str
    default: []
  path:
    description: The record file.
    type: path
    default: /var/lib/gpufabric/drift-record.json
attributes:
  check_mode:
    description: Reads the state and reports whether the record would change; writes nothing.
    support: full
  diff_mode:
    description: Shows the record before and after.
    support: full
"""

EXAMPLES = r"""
- name: Record what the roles manage, for the fast drift check
  gpufabric.cluster.drift_record:
    plan: "{{ gpufabric_plan }}"
    roles:
      - name: nccl_env
        files: [/etc/nccl.conf, /etc/profile.d/gpufabric-nccl.sh]
      - name: fabric_facts
"""

RETURN = r"""
record:
  description: The record as written (or, in check mode, as it would be).
  returned: success
  type: dict
  sample: {"format": 1, "roles": {"nccl_env": {"plan": "3f5a...", "state": {"files": {"/etc/nccl.conf":
           {"sha256": "9b1c...", "mode": "0644", "owner": "root", "group": "root"}}}}}}
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
    RECORD_FORMAT,
    DriftStateError,
    dump_record,
    load_record,
    plan_digest,
    read_state,
    role_entry,
    role_settings,
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


ROLE_SPEC = {
    "name": {"type": "str", "required": True},
    **{kind: {"type": "list", "elements": "path" if kind in PATH_KINDS else "str"} for kind in KINDS},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "roles": {"type": "list", "elements": "dict", "required": True, "options": ROLE_SPEC},
            "plan": {"type": "dict", "required": True},
            "settings": {"type": "dict", "default": {}},
            "keep": {"type": "list", "elements": "str", "default": []},
            "path": {"type": "path", "default": "/var/lib/gpufabric/drift-record.json"},
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    digest = plan_digest(module.params["plan"])
    settings = role_settings([items["name"] for items in module.params["roles"]], module.params["settings"])
    entries = {}
    for items in module.params["roles"]:
        role = items["name"]
        for kind in PATH_KINDS:
            relative = [item for item in items.get(kind) or [] if not os.path.isabs(item)]
            if relative:
                module.fail_json(msg=f"{role}: {kind}: {relative[0]!r} is not an absolute path", path=path)
        try:
            state = read_state(items, module.run_command)
        except DriftStateError as problem:
            module.fail_json(msg=f"{role}: {problem}", path=path)
        entries[role] = role_entry(digest, state, settings[role])
    before, problem = load_record(path)
    if problem and os.path.exists(path):
        module.warn(f"{problem}; it is written anew")
    kept = {role: before["roles"][role] for role in module.params["keep"] if role in before["roles"]}
    after = {"format": RECORD_FORMAT, "roles": {**kept, **entries}}
    changed = before != after
    result = {"changed": changed, "record": after, "path": path}
    if module._diff:
        result["diff"] = {
            "before_header": path,
            "after_header": path,
            "before": dump_record(before) if before["roles"] else "",
            "after": dump_record(after),
        }
    if changed and not module.check_mode:
        try:
            write_record(module, path, dump_record(after))
        except OSError as error:
            module.fail_json(msg=f"cannot write {path}: {error.strerror}", path=path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
