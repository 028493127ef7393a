# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: fabric_findings
author: gpufabric developers
version_added: "0.9.0"
short_description: Compare hardware facts with the hardware of the host's plan
description:
  - Takes the facts of the M(gpufabric.cluster.fabric_facts) module (C(gpufabric_hardware)) and the host's plan
    (C(gpufabric_plan), whose C(hardware) holds the catalog profile's C(fabric), C(gpu), C(nics) and C(sriov)
    sections), and returns the list of findings, each a dictionary with C(severity) (C(error), C(warning) or
    C(info)), C(check), C(subject) and C(message).
  - An empty list means the host has the profile's hardware, links up at the expected rate and the kernel
    modules the fabric needs.
  - Reads no catalog; a plan without hardware (profile C(unknown)) is an error.
  - The same comparison runs in C(gpufabric plan --probe).
positional: plan
options:
  _input:
    description: The C(gpufabric_hardware) facts.
    type: dict
    required: true
  plan:
    description: The host's plan, C(gpufabric_plan).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Read the hardware
  gpufabric.cluster.fabric_facts:

- name: Fail on hardware that cannot carry the profile
  ansible.builtin.assert:
    that: errors | length == 0
    fail_msg: "{{ errors | map(attribute='message') | join('; ') }}"
  vars:
    errors: >-
      {{ ansible_facts['gpufabric_hardware'] | gpufabric.cluster.fabric_findings(gpufabric_plan)
         | selectattr('severity', 'equalto', 'error') | list }}
"""

RETURN = r"""
_value:
  description:
    - The findings; empty when the host matches the profile. Each has C(severity), C(check), C(subject) and
      C(message).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import require_dict

findings = module_utils("fabric_findings")


def fabric_findings(facts, plan):
    require_dict(facts, "fabric_findings", "the gpufabric_hardware facts")
    require_dict(plan, "fabric_findings", "the host's plan gpufabric_plan")
    if not plan.get("hardware"):
        raise AnsibleFilterError(
            f"profile {plan.get('profile')!r} of gpufabric_plan has no hardware to compare with; accepted: a plan "
            "of a catalog profile (`gpufabric catalog list` lists them)"
        )
    return findings.findings(facts, plan["hardware"])


class FilterModule:
    def filters(self):
        return {"fabric_findings": fabric_findings}
