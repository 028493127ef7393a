# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: gcp_gpudirect_rdma_plan
author: gpufabric developers
version_added: "0.4.0"
short_description: Compute what the gcp_gpudirect_rdma role installs and checks on a host
description:
  - Takes the host's facts, the fabric_plan lookup for the profile and the role's settings; returns the
    repositories (the Artifact Registry transport only for C(ar+https) URLs), the pinned packages, the files
    the catalog environment names and C(errors), one message per bad input.
  - The same file provides C(gcp_gpudirect_rdma_nic_findings) (RDMA NIC checks on the gpufabric_hardware
    facts), C(gcp_gpudirect_rdma_script_exports) and C(gcp_gpudirect_rdma_env_differences) (Google's
    set_nccl_env.sh against the catalog environment) and C(gcp_gpudirect_rdma_blocking).
positional: catalog, settings
options:
  _input:
    description: The host's C(ansible_facts), after M(ansible.builtin.package_facts).
    type: dict
    required: true
  catalog:
    description: The result of the C(gpufabric.cluster.fabric_plan) lookup for the profile.
    type: dict
    required: true
  settings:
    description: The role's variables without the C(gcp_gpudirect_rdma_) prefix.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan gIB
  ansible.builtin.set_fact:
    gcp_gpudirect_rdma__plan: "{{ ansible_facts | gpufabric.cluster.gcp_gpudirect_rdma_plan(catalog, settings) }}"
"""

RETURN = r"""
_value:
  description:
    - Keys C(errors), C(transport), C(repos), C(gib_repo), C(transport_repo), C(packages), C(transport_packages),
      C(holds), C(pending), C(env), C(lib_dirs), C(plugin_pattern), C(files) and C(nics).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils import gcp_gpudirect_rdma as gib


def _dict(value, what):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"gcp_gpudirect_rdma filters expect {what} (a dictionary)")
    return value


def gcp_gpudirect_rdma_plan(facts, catalog, settings):
    return gib.plan(_dict(facts, "ansible_facts"), _dict(catalog, "the fabric plan"), _dict(settings, "settings"))


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
            "gcp_gpudirect_rdma_plan": gcp_gpudirect_rdma_plan,
            "gcp_gpudirect_rdma_nic_findings": gcp_gpudirect_rdma_nic_findings,
            "gcp_gpudirect_rdma_script_exports": gcp_gpudirect_rdma_script_exports,
            "gcp_gpudirect_rdma_env_differences": gcp_gpudirect_rdma_env_differences,
            "gcp_gpudirect_rdma_blocking": gcp_gpudirect_rdma_blocking,
        }
