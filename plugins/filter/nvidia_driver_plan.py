# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: nvidia_driver_plan
author: gpufabric developers
version_added: "0.9.0"
short_description: Everything the nvidia_driver role installs, and its checks
description:
  - Takes the role's settings and the host's facts and returns the packages with the exact versions the
    repository publishes on the host's distribution, the fabric manager and pinning packages, the kernel headers
    and the running kernel's compiler, the CUDA repository URL and key, the hold method, and C(supply), the steps
    the role hands to repo_key and vendor_packages unchanged; C(warnings), and C(errors) naming the first bad value
    and what is accepted.
  - The role does not read the catalog; its settings come from its own variables (site.yml maps the profile's GPU
    model and NVSwitch into them).
options:
  _input:
    description:
      - The role's variables without the C(nvidia_driver_) prefix (C(nvidia_driver__settings)), and
        C(kernel_version_text), the host's C(/proc/version), from which C(kernel_compiler) is read.
    type: dict
    required: true
  plan:
    description: The host's plan; this role does not read it (accepted for the one calling convention).
    type: dict
  facts:
    description:
      - The host's C(ansible_facts) (distribution, distribution_version, architecture, kernel).
      - Needed by this role; left out, the filter fails naming it.
    type: dict
"""

EXAMPLES = r"""
- name: Plan the driver install
  ansible.builtin.set_fact:
    nvidia_driver__plan: "{{ nvidia_driver__settings | gpufabric.cluster.nvidia_driver_plan(facts=ansible_facts) }}"
  vars:
    nvidia_driver__settings:
      source: cuda_repo
      branch: "570"
      version: 570.133.20
      kernel_modules: open
"""

RETURN = r"""
_value:
  description:
    - The C(NvidiaDriverPlan) of plugins/module_utils/nvidia_driver.py, keys C(errors) (empty when the inputs are
      acceptable), C(warnings), C(family), C(packages), C(fabricmanager_package), C(imex_package),
      C(nvlsm_packages) and C(nvlsm_modules) (NVLink-5 baseboards with fabric manager), C(pinning_package), C(pinned),
      C(versions), C(upstream_version), C(kernel_headers), C(kernel_compiler), C(cuda_repo_url),
      C(cuda_repo_key_url), C(lock), C(initramfs_command), C(supply) (a list of supply_chain.PackageStep).
  type: dict
"""


from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter


class FilterModule:
    def filters(self):
        return {
            "nvidia_driver_plan": role_plan_filter("nvidia_driver", module_utils("nvidia_driver"), reads_catalog=False)
        }
