# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter

gib = module_utils("gcp_gpudirect_rdma")


def _dict(value, what):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"gcp_gpudirect_rdma filters expect {what} (a dictionary)")
    return value


def gcp_gpudirect_rdma_nic_findings(hardware, nics):
    return gib.nic_findings(_dict(hardware, "the gpufabric_hardware facts"), _dict(nics, "the profile's nics"))


def gcp_gpudirect_rdma_script_exports(output):
    return gib.script_exports(str(output))


def gcp_gpudirect_rdma_env_differences(exports, catalog_env, script="set_nccl_env.sh"):
    return gib.env_differences(_dict(exports, "the script's exports"), _dict(catalog_env, "the catalog env"), script)


def gcp_gpudirect_rdma_blocking(findings, fail_on):
    return gib.blocking(list(findings), str(fail_on))


class FilterModule:
    def filters(self):
        return {
            "gcp_gpudirect_rdma_plan": role_plan_filter("gcp_gpudirect_rdma", gib),
            "gcp_gpudirect_rdma_nic_findings": gcp_gpudirect_rdma_nic_findings,
            "gcp_gpudirect_rdma_script_exports": gcp_gpudirect_rdma_script_exports,
            "gcp_gpudirect_rdma_env_differences": gcp_gpudirect_rdma_env_differences,
            "gcp_gpudirect_rdma_blocking": gcp_gpudirect_rdma_blocking,
        }
