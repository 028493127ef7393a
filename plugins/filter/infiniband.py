# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter

infiniband = module_utils("infiniband")


def _mapping(value, what):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{what} expects a dictionary, got {type(value).__name__}")
    return value


def infiniband_hcas(facts, plan):
    return infiniband.gpu_hcas(_mapping(facts, "infiniband_hcas"), _mapping(plan, "infiniband_hcas plan"))


def infiniband_port_findings(facts, plan, names):
    return infiniband.port_findings(
        _mapping(facts, "infiniband_port_findings"), _mapping(plan, "infiniband_port_findings plan"), list(names)
    )


def infiniband_env_findings(facts, env, names):
    return infiniband.env_findings(
        _mapping(facts, "infiniband_env_findings"), _mapping(env, "infiniband_env_findings env"), list(names)
    )


class FilterModule:
    def filters(self):
        return {
            "infiniband_plan": role_plan_filter("infiniband", infiniband),
            "infiniband_hcas": infiniband_hcas,
            "infiniband_port_findings": infiniband_port_findings,
            "infiniband_env_findings": infiniband_env_findings,
        }
