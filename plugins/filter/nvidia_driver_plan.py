# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: nvidia_driver_plan
author: gpufabric developers
version_added: "0.2.0"
short_description: Package names, repository and checks for the nvidia_driver role
description:
  - Takes the role's inputs as a dictionary and returns the packages to pin, the fabric manager package,
    the CUDA repository URL and the hold method for the host's distribution, or C(error) naming the first
    bad value and what is accepted.
options:
  _input:
    description: Keyword arguments of C(plan()) in module_utils/nvidia_driver.py.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the driver install
  ansible.builtin.set_fact:
    nvidia_driver__plan: "{{ {'source': 'distro', 'distribution': 'Debian', 'distribution_major_version': '12',
                              'architecture': 'x86_64', 'branch': '535', 'version': '535.261.03-1',
                              'kernel_modules': 'open'} | gpufabric.cluster.nvidia_driver_plan }}"
"""

RETURN = r"""
_value:
  description: The plan; C(error) is empty when the inputs are acceptable.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils.nvidia_driver import plan


def nvidia_driver_plan(inputs):
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("nvidia_driver_plan expects a dictionary of the role's inputs")
    try:
        return plan(**inputs)
    except TypeError as exc:
        raise AnsibleFilterError(f"nvidia_driver_plan: {exc}") from None


class FilterModule:
    def filters(self):
        return {"nvidia_driver_plan": nvidia_driver_plan}
