# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: fabric_nic_names
author: gpufabric developers
version_added: "0.9.0"
short_description: Name the plan's NICs as the host does, and fill the environment's NIC placeholders
description:
  - The catalog names no network interface; a profile's environment refers to its NICs through placeholders such as
    C({nics.gpu}), C({nics.gpu[0]}), C({nics.management}) and, for ConnectX GPU NICs' RDMA devices,
    C({nics.gpu_rdma}) and C({nics.gpu_rdma:1}) (docs/catalog.md, "NICs by identity").
  - Takes the host's plan (C(gpufabric_plan)) and returns it with C(nic_names) set (C(gpu) and C(management), each
    in PCI order, and C(gpu_rdma) where the GPU NICs are ConnectX), C(nics.gpu.interfaces) and
    C(nics.management.interfaces) set to those names and the placeholders of C(env) filled.
  - The names come from O(names) where given (the host var C(gpufabric_nic_names), for an image bake on a builder
    without the NICs), else from the facts of the M(gpufabric.cluster.fabric_facts) module, by identity (kind, PCI
    ids, GPU affinity, order on the bus).
  - An error names the variables, their placeholders, the profile and what the host has when it lacks the NICs.
  - The same mapping runs in C(gpufabric plan --probe).
positional: facts, names
options:
  _input:
    description: The host's plan, C(gpufabric_plan).
    type: dict
    required: true
  facts:
    description: The C(gpufabric_hardware) facts; not read when O(names) is given.
    type: dict
  names:
    description: The names of the NIC groups, C(gpu) and C(management), and C(gpu_rdma), each a list in PCI order.
    type: dict
"""

EXAMPLES = r"""
- name: Read the hardware
  gpufabric.cluster.fabric_facts:

- name: Name the plan's NICs as this host does
  ansible.builtin.set_fact:
    gpufabric_plan: >-
      {{ gpufabric_plan | gpufabric.cluster.fabric_nic_names(facts=ansible_facts['gpufabric_hardware']) }}
"""

RETURN = r"""
_value:
  description: The plan with C(nic_names), the NICs' C(interfaces) and C(env) filled.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import require_dict

nics = module_utils("fabric_nics")


def fabric_nic_names(plan, facts=None, names=None):
    require_dict(plan, "fabric_nic_names", "the host's plan gpufabric_plan")
    try:
        if names is not None:
            require_dict(names, "fabric_nic_names", "names= (gpufabric_nic_names: gpu and management name lists)")
            return nics.resolve_with_names(plan, names)
        require_dict(facts, "fabric_nic_names", "facts=, the gpufabric_hardware facts")
        return nics.resolve(plan, facts)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {"fabric_nic_names": fabric_nic_names}
