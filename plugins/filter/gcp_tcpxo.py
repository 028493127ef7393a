# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter

tcpxo = module_utils("gcp_tcpxo")


def gcp_tcpxo_nic_findings(hardware, interfaces, mtu=0):
    if not isinstance(hardware, dict) or not isinstance(interfaces, list):
        raise AnsibleFilterError("gcp_tcpxo_nic_findings expects gpufabric_hardware facts and a list of interfaces")
    return tcpxo.nic_findings(hardware, [str(name) for name in interfaces], int(mtu or 0))


def gcp_tcpxo_env_differences(script, env, lib_dir):
    if not isinstance(script, str) or not isinstance(env, dict):
        raise AnsibleFilterError("gcp_tcpxo_env_differences expects the script text and the catalog env")
    return tcpxo.env_differences(script, {str(k): str(v) for k, v in env.items()}, str(lib_dir))


class FilterModule:
    def filters(self):
        return {
            "gcp_tcpxo_plan": role_plan_filter("gcp_tcpxo", tcpxo),
            "gcp_tcpxo_nic_findings": gcp_tcpxo_nic_findings,
            "gcp_tcpxo_env_differences": gcp_tcpxo_env_differences,
        }
