# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils import infiniband


def _mapping(value, what):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{what} expects a dictionary, got {type(value).__name__}")
    return value


def infiniband_plan(settings, plan=None, facts=None):
    """``infiniband__settings | infiniband_plan(plan=gpufabric_plan, facts=ansible_facts)``."""
    for name, value in (("the piped settings", settings), ("plan=", plan), ("facts=", facts)):
        if not isinstance(value, dict):
            raise AnsibleFilterError(
                f"infiniband_plan: {name} is {type(value).__name__}; accepted: a dictionary (the role's variables "
                "without the infiniband_ prefix piped in, plan=gpufabric_plan, facts=ansible_facts)"
            )
    return infiniband.plan(settings, plan, facts)


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
            "infiniband_plan": infiniband_plan,
            "infiniband_hcas": infiniband_hcas,
            "infiniband_port_findings": infiniband_port_findings,
            "infiniband_env_findings": infiniband_env_findings,
        }
