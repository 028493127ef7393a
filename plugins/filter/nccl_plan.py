# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: nccl_plan
author: gpufabric developers
version_added: "0.9.0"
short_description: What the nccl role installs or holds (libnccl2, libnccl-dev), and its checks
description:
  - Takes the role's settings, the host's plan (the catalog's C(nccl) section, with the pinned package version,
    the minimum and their source) and the host's facts, and returns the packages at their exact versions, the CUDA
    repository, and C(supply), the steps the role hands to repo_key and vendor_packages unchanged; C(warnings), and
    C(errors) naming the first bad value and what is accepted.
  - In adopt mode (C(mode=adopt)) the image's libnccl2 at the minimum or newer is held at its installed version; an
    image without it gets the pin; an older one is refused.
options:
  _input:
    description: The role's variables without the C(nccl_) prefix (C(nccl__settings)).
    type: dict
    required: true
  plan:
    description:
      - The host's plan (C(gpufabric_plan)); its C(nccl) section gives the pin when C(version) is empty.
      - Needed by this role; left out, the filter fails naming it.
    type: dict
  facts:
    description:
      - The host's C(ansible_facts) (distribution, distribution_version, architecture; packages in adopt mode).
      - Needed by this role; left out, the filter fails naming it.
    type: dict
"""

EXAMPLES = r"""
- name: Plan NCCL
  ansible.builtin.set_fact:
    nccl__plan: "{{ nccl__settings | gpufabric.cluster.nccl_plan(plan=gpufabric_plan, facts=ansible_facts) }}"
  vars:
    nccl__settings:
      mode: install
      version: ""
"""

RETURN = r"""
_value:
  description:
    - The C(NcclPlan) of plugins/module_utils/nccl.py, keys C(errors) (empty when the inputs are acceptable),
      C(warnings), C(version), C(upstream), C(minimum), C(source), C(packages), C(cuda_repo_url), C(supply) (a list
      of supply_chain.PackageStep) and C(adopt).
  type: dict
"""


from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter


class FilterModule:
    def filters(self):
        return {"nccl_plan": role_plan_filter("nccl", module_utils("nccl"))}
