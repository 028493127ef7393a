#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: drift_check
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Compare a host with the record of its last apply (the fast drift check)
description:
  - For each role the host's plan runs, reads again the items the role recorded with
    M(gpufabric.cluster.drift_record) at its last apply, through the same code, and reports every difference;
    and compares the digest of the plan it applied with the digest of O(plan), and the role's settings it was
    given with O(settings), so a catalog or inventory change that moves the desired state is drift too
    (docs/drift.md, "The fast path").
  - A role with no entry in the record (never applied on this host, or applied by a gpufabric that did not
    record) is a finding, so a host is never reported clean on a record it does not have.
  - Reads only; C(changed) means drifted, as a check-mode run of the roles would say.
options:
  roles:
    description: The roles the host's plan runs, in order.
    type: list
    elements: str
    required: true
  plan:
    description: The host's plan now (C(gpufabric_plan)); only its digest is compared.
    type: dict
    required: true
  settings:
    description:
      - The digest of each role variable the inventory or the command line sets now, as for
        M(gpufabric.cluster.drift_record); one changed, added or removed since the last apply is a finding.
    type: dict
    default: {}
  path:
    description: The record file.
    type: path
    default: /var/lib/gpufabric/drift-record.json
attributes:
  check_mode:
    description: The same read-only comparison.
    support: full
  diff_mode:
    description:
      - Each finding as the recorded and the live value; for a managed file recorded with its text (small,
        world-readable, UTF-8), the text itself, so the diff shows the edit.
    support: full
"""

EXAMPLES = r"""
- name: Compare the host with the record of its last apply
  gpufabric.cluster.drift_check:
    roles: "{{ gpufabric_plan.roles }}"
    plan: "{{ gpufabric_plan }}"
"""

RETURN = r"""
drifted:
  description: Each drifted role's findings; a finding has role, kind (files, contents, packages, units,
    kernel_modules, plan, settings or record), item, recorded and live.
  returned: always
  type: dict
  sample: {"nccl_env": [{"role": "nccl_env", "kind": "files", "item": "/etc/nccl.conf",
           "recorded": {"sha256": "9b1c...", "mode": "0644", "owner": "root", "group": "root"},
           "live": {"sha256": "41d2...", "mode": "0644", "owner": "root", "group": "root"}}]}
roles:
  description: The roles checked.
  returned: always
  type: list
  elements: str
path:
  description: The record file.
  returned: always
  type: str
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.cluster.plugins.module_utils.drift_state import (
    ABSENT,
    DriftStateError,
    compare,
    load_record,
    plan_digest,
    role_settings,
)


def as_text(value: object) -> str:
    if value is None:
        return "(none)\n"
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def without_text(value: object) -> object:
    """A file's state without its text (the diff shows the text; the findings stay small)."""
    if isinstance(value, dict) and "text" in value:
        return {key: item for key, item in value.items() if key != "text"}
    return value


def diff_sides(finding: dict) -> tuple[str, str]:
    """The recorded and live sides of a finding's diff: a managed file's text when it changed (the edit, as a
    thorough check's diff shows it), else the state as JSON."""
    was, now = finding["recorded"], finding["live"]
    text_changed = (
        finding["kind"] == "files"
        and isinstance(was, dict)
        and isinstance(now, dict)
        and "text" in was
        and ("text" in now or now == ABSENT)
        and was.get("text") != now.get("text")
    )
    if text_changed:
        return was["text"], now.get("text", "")
    return as_text(without_text(was)), as_text(without_text(now))


def diff_entry(finding: dict) -> dict:
    before, after = diff_sides(finding)
    return {
        "role": finding["role"],  # for gpufabric's report, which lists each drifted role's own diffs
        "before_header": f"{finding['role']} {finding['kind']} {finding['item']} (recorded)",
        "after_header": f"{finding['role']} {finding['kind']} {finding['item']} (now)",
        "before": before,
        "after": after,
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "roles": {"type": "list", "elements": "str", "required": True},
            "plan": {"type": "dict", "required": True},
            "settings": {"type": "dict", "default": {}},
            "path": {"type": "path", "default": "/var/lib/gpufabric/drift-record.json"},
        },
        supports_check_mode=True,
    )
    path, roles = module.params["path"], module.params["roles"]
    digest = plan_digest(module.params["plan"])
    record, _problem = load_record(path)  # a missing or unreadable record: every role below has no entry
    settings = role_settings(roles, module.params["settings"])
    drifted = {}
    try:
        for role in roles:
            findings = compare(role, record["roles"].get(role), digest, module.run_command, settings[role])
            if findings:
                drifted[role] = findings
    except DriftStateError as problem:
        module.fail_json(msg=str(problem), path=path, roles=roles)
    result = {"changed": bool(drifted), "drifted": drifted, "roles": roles, "path": path}
    if module._diff:
        result["diff"] = [diff_entry(finding) for findings in drifted.values() for finding in findings]
    for findings in drifted.values():  # the texts are in the diffs: the result stays small
        for finding in findings:
            finding["recorded"], finding["live"] = without_text(finding["recorded"]), without_text(finding["live"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
