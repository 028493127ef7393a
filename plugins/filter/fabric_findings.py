# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: fabric_findings
author: gpufabric developers
version_added: "0.2.0"
short_description: Compare hardware facts with a fabric catalog profile
description:
  - Takes the facts of the M(gpufabric.cluster.fabric_facts) module (C(gpufabric_hardware)) and a catalog
    profile name, and returns the list of findings, each a dictionary with C(severity) (C(error), C(warning)
    or C(info)), C(check), C(subject) and C(message).
  - An empty list means the host has the profile's hardware, links up at the expected rate and the kernel
    modules the fabric needs.
  - The same comparison runs in C(gpufabric plan --probe).
positional: profile
options:
  _input:
    description: The C(gpufabric_hardware) facts.
    type: dict
    required: true
  profile:
    description: Catalog profile name such as C(gcp/a3-megagpu-8g).
    type: str
    required: true
  catalog_files:
    description: Override catalog files merged over the built-in catalog, in order.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Read the hardware
  gpufabric.cluster.fabric_facts:

- name: Fail on hardware that cannot carry the profile
  ansible.builtin.assert:
    that: errors | length == 0
    fail_msg: "{{ errors | map(attribute='message') | join('; ') }}"
  vars:
    errors: >-
      {{ ansible_facts['gpufabric_hardware'] | gpufabric.cluster.fabric_findings('gcp/a3-megagpu-8g')
         | selectattr('severity', 'equalto', 'error') | list }}
"""

RETURN = r"""
_value:
  description: The findings; empty when the host matches the profile.
  type: list
  elements: dict
"""

from pathlib import Path

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils.fabric_findings import findings
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_catalog import (
    CatalogError,
    load_catalog,
    override_files_from_env,
)


def fabric_findings(facts, profile, catalog_files=()):
    if not isinstance(facts, dict):
        raise AnsibleFilterError("fabric_findings expects the gpufabric_hardware facts (a dictionary)")
    try:
        catalog = load_catalog([*override_files_from_env(), *(Path(f) for f in catalog_files)])
    except CatalogError as exc:
        raise AnsibleFilterError(f"gpufabric catalog: {exc}") from None
    found = catalog.get(profile)
    if found is None:
        raise AnsibleFilterError(
            f"profile {profile!r} is not in the fabric catalog; `gpufabric catalog list` lists them"
        )
    return findings(facts, found)


class FilterModule:
    def filters(self):
        return {"fabric_findings": fabric_findings}
