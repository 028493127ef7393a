# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: nvlink_members
author: gpufabric developers
version_added: "0.9.0"
short_description: The members of every NVLink domain in the inventory, with their addresses
description:
  - Takes the inventory's host names (C(groups['all'])) and C(hostvars), and returns, for each NVLink domain a
    host names in C(gpufabric_nvlink_domain), the addresses of its hosts (C(ansible_host), else the host name),
    sorted by host name.
  - The whole inventory, not the play's hosts, so that an apply with C(--limit) still writes IMEX's nodes
    configuration with every member of the domain. The imex role calls it once per run (C(run_once)).
options:
  _input:
    description: The host names to look at, normally C(groups['all']).
    type: list
    elements: str
    required: true
  hostvars:
    description: Ansible's C(hostvars).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Find the members of every NVLink domain, once
  ansible.builtin.set_fact:
    imex__domains: "{{ groups['all'] | gpufabric.cluster.nvlink_members(hostvars) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: Domain name -> the addresses of its hosts.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.nvlink_domains import DOMAIN_VAR


def nvlink_members(hosts, hostvars):
    if not isinstance(hosts, list):
        raise AnsibleFilterError(f"nvlink_members: the input must be a list of host names, got {type(hosts).__name__}")
    domains = {}
    for name in sorted(hosts):
        variables = hostvars[name]
        domain = variables.get(DOMAIN_VAR)
        if not domain:
            continue
        domains.setdefault(str(domain), []).append(str(variables.get("ansible_host") or name))
    return domains


class FilterModule:
    def filters(self):
        return {"nvlink_members": nvlink_members}
