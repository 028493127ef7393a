# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: host_tuning_plan
author: gpufabric developers
version_added: "0.9.0"
short_description: What the host_tuning role manages (ACS, IOMMU, ConnectX ordering, governor, irqbalance)
description:
  - Takes the role's settings, the host's plan (its C(host_tuning) section, the catalog profile's) and the host's
    facts, and returns each setting's value and where it comes from (the role variable, else the profile; the value
    C(unmanaged), or neither naming one, leaves it alone), the packages, files and units each needs, and the IOMMU
    kernel parameter for the host's architecture (C(iommu=pt) on x86_64, C(iommu.passthrough=1) on aarch64).
  - C(errors) names each bad value, the variable or profile key it came from, and what is accepted.
options:
  _input:
    description: The role's variables without the C(host_tuning_) prefix (C(host_tuning__settings)).
    type: dict
    required: true
  plan:
    description:
      - The host's plan (C(gpufabric_plan)); its C(host_tuning) section gives the values the variables leave empty.
      - An empty dictionary, or a plan whose C(host_tuning) is null, means the profile sets nothing.
    type: dict
  facts:
    description: The host's C(ansible_facts) (C(architecture)).
    type: dict
"""

EXAMPLES = r"""
- name: Plan the host tuning
  ansible.builtin.set_fact:
    host_tuning__plan: >-
      {{ host_tuning__settings | gpufabric.cluster.host_tuning_plan(plan=gpufabric_plan, facts=ansible_facts) }}
  vars:
    host_tuning__settings:
      acs: ""
      iommu: passthrough
      nic_pci_write_ordering: unmanaged
      cpu_governor: ""
      irqbalance: ""
      bake: false
      sysfs_root: /sys
      grub_dropin: /etc/default/grub.d/99-gpufabric-host-tuning.cfg
"""

RETURN = r"""
_value:
  description:
    - The plan of plugins/module_utils/host_tuning.py, keys C(errors), C(settings) (per setting C(value), empty when
      unmanaged, C(source), C(packages), C(files), C(units)), C(iommu_parameter), C(packages), C(script),
      C(unit_dir), C(acs_unit), C(governor_unit), C(grub_dropin) and C(profile_source).
  type: dict
"""

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter


class FilterModule:
    def filters(self):
        return {"host_tuning_plan": role_plan_filter("host_tuning", module_utils("host_tuning"))}
