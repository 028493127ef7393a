# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter

roce = module_utils("roce")


def roce_devices(hardware, plan):
    """The plan's GPU-network RoCE devices among the hardware facts."""
    if not isinstance(hardware, dict) or not isinstance(plan, dict):
        raise AnsibleFilterError("roce_devices expects the hardware facts and the roce plan")
    return roce.select_devices(hardware, plan["include"], plan["exclude"], plan["exclude_netdevs"])


def roce_gid_errors(devices, index, require_ipv4=True, address_setup=""):
    if not isinstance(devices, list):
        raise AnsibleFilterError("roce_gid_errors expects a list of RDMA devices")
    return roce.gid_errors(devices, None if index is None else int(index), bool(require_ipv4), str(address_setup or ""))


def roce_expected_files(devices, plan, root="/"):
    return roce.expected_files(devices, plan, root)


def roce_readback_errors(lines, expected):
    return roce.readback_errors(list(lines), dict(expected))


class FilterModule:
    def filters(self):
        return {
            "roce_plan": role_plan_filter("roce", roce),
            "roce_devices": roce_devices,
            "roce_gid_errors": roce_gid_errors,
            "roce_expected_files": roce_expected_files,
            "roce_readback_errors": roce_readback_errors,
        }
