# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: gds_plan
author: gpufabric developers
version_added: "0.9.0"
short_description: What the gds role installs, holds and writes for GPUDirect Storage, and its checks
description:
  - Takes the role's settings, the host's plan (the catalog's storage NICs and the NCCL pin, whose CUDA release is
    the default one) and the host's facts, and returns the GDS packages (nvidia-fs-dkms, nvidia-fs,
    nvidia-gds-<X>-<Y>, libcufile-<X>-<Y>, gds-tools-<X>-<Y>) at their versions, the text of /etc/cufile.json, and
    C(supply), the steps the role hands to repo_key and vendor_packages unchanged; C(warnings), and C(errors) naming
    the first bad value and what is accepted.
  - In adopt mode (C(provision=adopt)) what the image ships of these packages is held at its installed version; the
    rest is installed at the pins.
options:
  _input:
    description: The role's variables without the C(gds_) prefix (C(gds__settings)).
    type: dict
    required: true
  plan:
    description:
      - The host's plan (C(gpufabric_plan)); its C(storage) section gives the storage NICs, its C(nccl) section the
        CUDA release when C(cuda_version) is empty.
      - Needed by this role; left out, the filter fails naming it.
    type: dict
  facts:
    description:
      - The host's C(ansible_facts) (distribution, distribution_version, architecture; packages in adopt mode).
      - Needed by this role; left out, the filter fails naming it.
    type: dict
"""

EXAMPLES = r"""
- name: Plan GPUDirect Storage
  ansible.builtin.set_fact:
    gds__plan: "{{ gds__settings | gpufabric.cluster.gds_plan(plan=gpufabric_plan, facts=ansible_facts) }}"
  vars:
    gds__settings:
      provision: install
      cuda_version: "12.8"
      mounts: [{path: /mnt/nfs, type: nfs}]
      storage_addresses: [192.0.2.10]
"""

RETURN = r"""
_value:
  description:
    - The C(GdsPlan) of plugins/module_utils/gds.py, keys C(errors) (empty when the inputs are acceptable),
      C(warnings), C(cuda), C(cuda_source), C(packages), C(kernel_packages), C(gdscheck), C(mounts),
      C(storage_addresses), C(storage_nics), C(cufile), C(cufile_json), C(cuda_repo_url), C(supply) (a list of
      supply_chain.PackageStep) and C(adopt).
  type: dict
"""


from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter


class FilterModule:
    def filters(self):
        return {"gds_plan": role_plan_filter("gds", module_utils("gds"))}
