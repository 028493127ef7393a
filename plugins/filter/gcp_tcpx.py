# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: gcp_tcpx_plan
author: gpufabric developers
version_added: "0.4.0"
short_description: Compute what the gcp_tcpx role installs and runs on a GPUDirect-TCPX VM
description:
  - Takes the host's facts, the profile's fabric plan and the gcp_tcpx role's settings and returns the
    container runtime packages, the image references pinned by digest, the RxDM unit's command line, the
    device nodes, the firewall interfaces and the paths the catalog environment points at.
  - Returns C(errors), one clear message per bad input; the role fails on them before it changes anything.
positional: fabric_plan, settings
options:
  _input:
    description: The host's C(ansible_facts) (os_family, distribution, distribution_major_version).
    type: dict
    required: true
  fabric_plan:
    description: The C(gpufabric.cluster.fabric_plan) lookup result for the profile, tier C(best).
    type: dict
    required: true
  settings:
    description: The role's variables without the C(gcp_tcpx_) prefix.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan GPUDirect-TCPX
  ansible.builtin.set_fact:
    gcp_tcpx__plan: "{{ ansible_facts | gpufabric.cluster.gcp_tcpx_plan(gcp_tcpx__fabric, gcp_tcpx__settings) }}"
"""

RETURN = r"""
_value:
  description:
    - Keys C(errors), C(warnings), C(runtime) (name, binary, service, packages for
      C(gpufabric.cluster.vendor_packages)), C(images) (reference, tagged per C(rxdm) and C(plugin)), C(devices),
      C(interfaces), C(mtu), C(firewall_interfaces),
      C(nvidia) (staged, mount_dir, libraries, link), C(rxdm_exec), C(installer_argv), C(stamp) and paths.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils.gcp_tcpx import plan


def gcp_tcpx_plan(facts, fabric_plan, settings):
    if not all(isinstance(value, dict) for value in (facts, fabric_plan, settings)):
        raise AnsibleFilterError("gcp_tcpx_plan expects ansible_facts, the fabric plan and a settings dictionary")
    return plan(facts, fabric_plan, settings)


class FilterModule:
    def filters(self):
        return {"gcp_tcpx_plan": gcp_tcpx_plan}
