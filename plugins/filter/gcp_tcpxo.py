# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: gcp_tcpxo_plan
author: gpufabric developers
version_added: "0.4.0"
short_description: Compute what the gcp_tcpxo role installs and checks on an a3-megagpu-8g host
description:
  - Takes the host's facts, the gcp_tcpxo role's settings and the catalog plan (the
    C(gpufabric.cluster.fabric_plan) lookup) and returns the image references (by digest), the GPU devices
    and driver libraries the RxDM gets, the GPU NICs to check and open, the plugin directory the catalog
    env loads from and the distribution's package and path choices.
  - Returns C(errors), one sentence per bad input or catalog env that Google's guest-config checker would
    refuse; the role fails on them before it changes anything. C(warnings) are reported only.
  - The same file holds C(gcp_tcpxo_nic_findings) (hardware facts, interface list, MTU; one sentence per GPU NIC
    that is missing, not up or below the MTU) and C(gcp_tcpxo_packages) (settings, distribution
    packages; the packages of the two C(gpufabric.cluster.vendor_packages) runs) and C(gcp_tcpxo_env_differences)
    (the text of Google's nccl-env-profile.sh, the catalog env, the plugin directory; one sentence per NCCL
    variable on which they disagree).
positional: settings, catalog
options:
  _input:
    description: The host's C(ansible_facts) (distribution, distribution_major_version, architecture, kernel).
    type: dict
    required: true
  settings:
    description: The role's variables without the C(gcp_tcpxo_) prefix.
    type: dict
    required: true
  catalog:
    description: The C(gpufabric.cluster.fabric_plan) lookup's plan for the profile.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan GPUDirect-TCPXO
  ansible.builtin.set_fact:
    gcp_tcpxo__plan: "{{ ansible_facts | gpufabric.cluster.gcp_tcpxo_plan(settings, catalog_plan) }}"
"""

RETURN = r"""
_value:
  description:
    - Keys C(errors), C(warnings), C(profile), C(distro), C(interfaces), C(firewall_interfaces), C(mtu),
      C(lib_dir), C(plugin_dir), C(plugin_lib64), C(tuner_config), C(guest_config), C(rxdm_ref),
      C(plugin_ref), C(gpu_devices) and C(driver_libraries).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils.gcp_tcpxo import (
    env_differences,
    nic_findings,
    packages,
    plan,
)


def gcp_tcpxo_plan(facts, settings, catalog):
    if not all(isinstance(value, dict) for value in (facts, settings, catalog)):
        raise AnsibleFilterError("gcp_tcpxo_plan expects ansible_facts, a settings dictionary and a catalog plan")
    return plan(facts, settings, catalog)


def gcp_tcpxo_nic_findings(hardware, interfaces, mtu=0):
    if not isinstance(hardware, dict) or not isinstance(interfaces, list):
        raise AnsibleFilterError("gcp_tcpxo_nic_findings expects gpufabric_hardware facts and a list of interfaces")
    return nic_findings(hardware, [str(name) for name in interfaces], int(mtu or 0))


def gcp_tcpxo_packages(settings, distro_packages):
    if not isinstance(settings, dict) or not isinstance(distro_packages, list):
        raise AnsibleFilterError("gcp_tcpxo_packages expects the settings and a list of distribution packages")
    return packages(settings, [str(name) for name in distro_packages])


def gcp_tcpxo_env_differences(script, env, lib_dir):
    if not isinstance(script, str) or not isinstance(env, dict):
        raise AnsibleFilterError("gcp_tcpxo_env_differences expects the script text and the catalog env")
    return env_differences(script, {str(k): str(v) for k, v in env.items()}, str(lib_dir))


class FilterModule:
    def filters(self):
        return {
            "gcp_tcpxo_plan": gcp_tcpxo_plan,
            "gcp_tcpxo_nic_findings": gcp_tcpxo_nic_findings,
            "gcp_tcpxo_packages": gcp_tcpxo_packages,
            "gcp_tcpxo_env_differences": gcp_tcpxo_env_differences,
        }
