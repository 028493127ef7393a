# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: infiniband_plan
author: gpufabric developers
version_added: "0.4.0"
short_description: Validate the infiniband role's inputs against its catalog profile
description:
  - Takes the C(gpufabric.cluster.fabric_plan) lookup's result for the profile and the role's settings and
    returns the HCA names, the expected port rate, the partition (P_Key) to require, the environment to check,
    the SHARP package specifications for the host's package manager and C(errors), one sentence per bad input.
  - The same file provides C(infiniband_hcas), C(infiniband_port_findings) and C(infiniband_env_findings),
    which hold C(gpufabric.cluster.fabric_facts) facts to the plan.
positional: settings
options:
  _input:
    description: The C(gpufabric.cluster.fabric_plan) lookup's result (profile, fabric, env, nics).
    type: dict
    required: true
  settings:
    description: The role's variables without the C(infiniband_) prefix, plus C(os_family).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the InfiniBand checks
  ansible.builtin.set_fact:
    infiniband__plan: >-
      {{ catalog_plan | gpufabric.cluster.infiniband_plan({'pkey': '0x8001', 'pkey_membership': 'full'}) }}

- name: List what is wrong with the GPU-network ports
  ansible.builtin.debug:
    msg: >-
      {{ ansible_facts.gpufabric_hardware | gpufabric.cluster.infiniband_port_findings(infiniband__plan, ['mlx5_0']) }}
"""

RETURN = r"""
_value:
  description:
    - C(infiniband_plan) returns C(profile), C(fabric), C(count), C(speed_gbit_s), C(devices), C(pkey) (null, or
      C(partition), C(child), C(suffix), C(membership), C(table_entries)), C(env), C(topo_file), C(topo_file_hint),
      C(sharp_packages) (name, version, spec) and C(errors).
    - C(infiniband_hcas) returns C(names) and C(problems); the findings filters return lists of sentences.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils import infiniband


def _mapping(value, what):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{what} expects a dictionary, got {type(value).__name__}")
    return value


def infiniband_plan(catalog, settings):
    return infiniband.plan(_mapping(catalog, "infiniband_plan"), _mapping(settings, "infiniband_plan settings"))


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
