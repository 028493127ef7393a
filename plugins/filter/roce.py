# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: roce_plan
author: gpufabric developers
version_added: "0.3.0"
short_description: Check the roce role's settings against the catalog and derive the RoCE QoS to apply
description:
  - Takes the roce role's variables (without the C(roce_) prefix), the catalog plan under C(catalog) and the
    host's C(os_family), and returns the values the QoS script applies (trust, DSCP-to-priority map, PFC and
    ECN priorities, traffic class, rdma_cm ToS and RoCE mode), the device patterns, the priority NCCL's
    traffic lands on, C(warnings), and C(errors), one message per bad input.
  - The same module also provides C(roce_devices) (the GPU-network RoCE devices among the hardware facts),
    C(roce_gid_errors) (GID table problems per device port), C(roce_expected_files) and
    C(roce_readback_errors) (live read-back of sysfs).
positional: _input
options:
  _input:
    description: The settings dictionary.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the RoCE QoS
  ansible.builtin.set_fact:
    roce__plan: >-
      {{ {'catalog': gpufabric_plan, 'trust': 'dscp', 'pfc_priorities': [3]} | gpufabric.cluster.roce_plan }}
"""

RETURN = r"""
_value:
  description:
    - Keys C(errors), C(warnings), C(gid_index), C(catalog_tc), C(dscp), C(ecn_bits), C(priority),
      C(priority_basis), C(trust), C(dscp2prio), C(pfc), C(ecn), C(traffic_class), C(default_tos), C(mode),
      C(wait_seconds), C(include), C(exclude), C(exclude_netdevs), C(expect_devices), C(device_source),
      C(needs_qos_tool), C(qos_tool_package).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils import roce


def roce_plan(settings):
    if not isinstance(settings, dict):
        raise AnsibleFilterError("roce_plan expects a settings dictionary")
    return roce.plan(settings)


def roce_devices(hardware, plan):
    """The plan's GPU-network RoCE devices among the hardware facts."""
    if not isinstance(hardware, dict) or not isinstance(plan, dict):
        raise AnsibleFilterError("roce_devices expects the hardware facts and the roce plan")
    return roce.select_devices(hardware, plan["include"], plan["exclude"], plan["exclude_netdevs"])


def roce_gid_errors(devices, index, require_ipv4=True):
    if not isinstance(devices, list):
        raise AnsibleFilterError("roce_gid_errors expects a list of RDMA devices")
    return roce.gid_errors(devices, None if index is None else int(index), bool(require_ipv4))


def roce_expected_files(devices, plan, root="/"):
    return roce.expected_files(devices, plan, root)


def roce_readback_errors(lines, expected):
    return roce.readback_errors(list(lines), dict(expected))


class FilterModule:
    def filters(self):
        return {
            "roce_plan": roce_plan,
            "roce_devices": roce_devices,
            "roce_gid_errors": roce_gid_errors,
            "roce_expected_files": roce_expected_files,
            "roce_readback_errors": roce_readback_errors,
        }
