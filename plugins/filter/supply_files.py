# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: supply_files
author: gpufabric developers
version_added: "0.9.0"
short_description: The files a role's supply steps write on an APT host
description:
  - Takes a role plan's C(supply), the package steps its tasks hand to M(gpufabric.cluster.repo_key) and
    M(gpufabric.cluster.vendor_packages), and returns every file those write on an APT host, once each, in this
    order - each key's keyring, each repository's deb822 source (C(/etc/apt/sources.list.d/NAME.sources)) and each
    step's APT preferences file (C(/etc/apt/preferences.d/NAME.pref)).
  - A role's declaration for the fast drift check (C(gpufabric_drift_items), docs/drift.md) lists them, so a
    replaced key, an edited source or a removed pin is drift in that role.
options:
  _input:
    description: The steps (plugins/module_utils/supply_chain.py C(PackageStep)).
    type: list
    elements: dict
    required: true
  repositories:
    description:
      - Include the keyrings and sources. False gives the preferences files only, for an adopt mode that pins the
        image's packages and configures no repository.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Declare what the role manages, for the fast drift check
  ansible.builtin.set_fact:
    gpufabric_drift_items: >-
      {{ gpufabric_drift_items | default([])
         + [{'name': 'rdma_stack', 'files': rdma_stack__plan.supply | gpufabric.cluster.supply_files}] }}
"""

RETURN = r"""
_value:
  description: Absolute paths, each once.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils

supply_chain = module_utils("supply_chain")


def supply_files_filter(steps, repositories=True):
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise AnsibleFilterError(
            "supply_files: the supply must be a list of package steps (a role plan's supply), "
            f"got {type(steps).__name__}"
        )
    try:
        return supply_chain.supply_files(steps, repositories=bool(repositories))
    except KeyError as missing:
        raise AnsibleFilterError(
            f"supply_files: a package step lacks {missing}; accepted: a role plan's supply"
        ) from None


class FilterModule:
    def filters(self):
        return {"supply_files": supply_files_filter}
