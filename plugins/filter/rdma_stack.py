# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: rdma_stack_plan
author: gpufabric developers
version_added: "0.3.0"
short_description: Compute what the rdma_stack role installs, holds and loads on a host
description:
  - Takes the host's facts and the rdma_stack role's settings and returns the packages with their exact
    version specifications for the host's package manager, the packages to hold, the kernel modules and,
    for the C(doca) flavor, the repository coordinates.
  - Returns C(errors), one clear message per bad input; the role fails on them before it changes anything.
positional: settings
options:
  _input:
    description:
      - The host's C(ansible_facts) (os_family, distribution, distribution_version, architecture) and, after
        M(ansible.builtin.package_facts), C(packages).
    type: dict
    required: true
  settings:
    description: The role's variables without the C(rdma_stack_) prefix.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the RDMA stack
  ansible.builtin.set_fact:
    rdma_stack__plan: "{{ ansible_facts | gpufabric.cluster.rdma_stack_plan({'flavor': 'inbox', 'fabric': 'infiniband',
                          'inbox_packages': {'rdma-core': '44.0-2'}}) }}"
"""

RETURN = r"""
_value:
  description:
    - Keys C(flavor), C(manager), C(packages) (name, version, spec), C(holds), C(kernel_modules), C(repo),
      C(pending) (pinned packages not installed at their pin, from C(ansible_facts.packages)) and C(errors).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils.rdma_stack import plan


def rdma_stack_plan(facts, settings):
    if not isinstance(facts, dict) or not isinstance(settings, dict):
        raise AnsibleFilterError("rdma_stack_plan expects ansible_facts and a settings dictionary")
    return plan(facts, settings)


class FilterModule:
    def filters(self):
        return {"rdma_stack_plan": rdma_stack_plan}
