# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: rdma_stack_plan
author: gpufabric developers
version_added: "0.9.0"
short_description: Compute what the rdma_stack role installs, holds and loads on a host
description:
  - Takes the rdma_stack role's settings and the host's facts and returns the packages with their exact
    version specifications for the host's package manager, the packages to hold, the kernel modules, for the
    C(doca) flavor the repository coordinates, and everything installed as the supply chain (keys,
    repositories, packages with their versions and repository).
  - Returns C(errors), one clear message per bad input (the role fails on them before it changes anything),
    and C(warnings).
  - The role does not read the catalog; its settings come from its own variables (site.yml maps
    C(rdma_stack_fabric) from the host's plan).
options:
  _input:
    description: The role's variables without the C(rdma_stack_) prefix (C(rdma_stack__settings)).
    type: dict
    required: true
  plan:
    description: The host's plan; this role does not read it (accepted for the one calling convention).
    type: dict
  facts:
    description:
      - The host's C(ansible_facts) (os_family, distribution, distribution_version, architecture, kernel) and, after
        M(ansible.builtin.package_facts), C(packages) (in adopt mode, what the image ships).
      - Needed by this role; left out, the filter fails naming it.
    type: dict
"""

EXAMPLES = r"""
- name: Plan the RDMA stack
  ansible.builtin.set_fact:
    rdma_stack__plan: "{{ rdma_stack__settings | gpufabric.cluster.rdma_stack_plan(facts=ansible_facts) }}"
  vars:
    rdma_stack__settings:
      flavor: inbox
      fabric: infiniband
      inbox_packages: {}  # the release's own table
"""

RETURN = r"""
_value:
  description:
    - The C(RdmaStackPlan) of plugins/module_utils/rdma_stack.py, keys C(flavor), C(manager), C(packages)
      (name, version, spec), C(holds), C(kernel_modules), C(repo), C(apt_pins) (APT preferences files written
      before the packages, DOCA's dkms pinned away on Ubuntu), C(supply) (plugins/module_utils/supply_chain.py,
      what repo_key and vendor_packages are given), C(pending) (packages of the supply not installed at their pin,
      from C(ansible_facts.packages)), C(adopt) (plugins/module_utils/adopt.py's C(Adoption); in adopt mode the
      image's packages found and held, the missing ones installed, or why the image's stack is refused),
      C(warnings) and C(errors).
  type: dict
"""


from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter


class FilterModule:
    def filters(self):
        return {"rdma_stack_plan": role_plan_filter("rdma_stack", module_utils("rdma_stack"), reads_catalog=False)}
