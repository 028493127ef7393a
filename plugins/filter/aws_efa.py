# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: aws_efa
author: gpufabric developers
version_added: "0.4.0"
short_description: Plan the EFA installer run and read its results for the aws_efa role
description:
  - C(plan) takes the role's inputs and the host's facts and returns the installer URL, the tarball and
    unpack paths, the C(efa_installer.sh) flags, the installed version and why the installer must run
    (empty when it need not), or C(error) naming the first bad value and what is accepted.
  - C(fi_info) takes the output of C(fi_info -p efa -t FI_EP_RDM) and returns the EFA devices it lists,
    whether they reach O(expected), and a sentence for the operator.
  - C(libraries) takes the catalog's C(LD_LIBRARY_PATH) and the library files found there and returns
    findings (C(error) when NCCL could not use EFA, C(warning) otherwise).
  - The logic lives in plugins/module_utils/aws_efa.py and is unit-tested there.
positional: what
options:
  _input:
    description:
      - For C(plan), a dictionary of the role's inputs (see C(plan()) in module_utils/aws_efa.py).
      - For C(fi_info), the command's standard output.
      - For C(libraries), the catalog's C(LD_LIBRARY_PATH) value.
    type: raw
    required: true
  what:
    description: Which computation.
    type: str
    choices: [plan, fi_info, libraries]
    required: true
  expected:
    description: For C(fi_info), the number of EFA devices the profile has.
    type: int
    default: 0
  profile:
    description: For C(fi_info), the catalog profile name used in the message.
    type: str
    default: ""
  found:
    description: For C(libraries), paths of the library files present in those directories.
    type: list
    elements: str
    default: []
  wanted:
    description: For C(libraries), the components the installer was asked for (the plan's C(components)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Count the EFA devices libfabric can open
  ansible.builtin.assert:
    that: report.ok
    fail_msg: "{{ report.message }}"
  vars:
    report: "{{ fi_info_output | gpufabric.cluster.aws_efa('fi_info', expected=32, profile='aws/p5.48xlarge') }}"
"""

RETURN = r"""
_value:
  description: The plan, the fi_info report or the list of library findings.
  type: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils.aws_efa import (
    fi_info_report,
    library_findings,
    plan,
)


def aws_efa(value, what, expected=0, profile="", found=None, wanted=None):
    if what == "plan":
        if not isinstance(value, dict):
            raise AnsibleFilterError("aws_efa('plan') expects a dictionary of the role's inputs")
        return plan(value)
    if what == "fi_info":
        return fi_info_report(str(value or ""), int(expected), str(profile))
    if what == "libraries":
        return library_findings(str(value or ""), list(found or []), list(wanted or []))
    raise AnsibleFilterError(f"aws_efa: '{what}' is not a computation; accepted: plan, fi_info, libraries")


class FilterModule:
    def filters(self):
        return {"aws_efa": aws_efa}
