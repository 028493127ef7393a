# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: gcp_tcpx_plan
author: gpufabric developers
version_added: "0.9.0"
short_description: Compute what the gcp_tcpx role installs and runs on a GPUDirect-TCPX VM
description:
  - Takes the gcp_tcpx role's settings, the host's plan and its facts and returns the container runtime
    packages, the image references pinned by digest, the RxDM unit's command line, the device nodes, the
    firewall interfaces and the paths the catalog environment points at.
  - Returns C(errors), one clear message per bad input; the role fails on them before it changes anything.
  - Fails (a filter error) when the settings, C(plan) or C(facts) is not a dictionary.
positional: plan, facts
options:
  _input:
    description: The role's variables without the C(gcp_tcpx_) prefix (C(gcp_tcpx__settings)).
    type: dict
    required: true
  plan:
    description:
      - The host's plan, C(gpufabric_plan) (profile, fabric, env, gpus, nics). This filter needs it.
    type: dict
  facts:
    description:
      - The host's C(ansible_facts) (os_family, distribution, distribution_major_version). This filter needs them.
    type: dict
"""

EXAMPLES = r"""
- name: Plan GPUDirect-TCPX
  ansible.builtin.set_fact:
    gcp_tcpx__plan: >-
      {{ gcp_tcpx__settings | gpufabric.cluster.gcp_tcpx_plan(plan=gpufabric_plan, facts=ansible_facts) }}
"""

RETURN = r"""
_value:
  description:
    - Keys C(errors), C(warnings), C(runtime) (name, binary, service, packages for
      C(gpufabric.cluster.vendor_packages)), C(images) (reference, tagged per C(rxdm) and C(plugin)), C(gpu_count),
      C(devices), C(interfaces), C(mtu), C(firewall_interfaces), C(iptables), C(plugin_dir), C(uds_path),
      C(uds_runtime_directory), C(nvidia) (staged, mount_dir, libraries, link), C(rxdm_exec_lines), C(rxdm_args),
      C(installer_argv), C(container) and C(stamp) (module_utils/gcp_tcpx.py GcpTcpxPlan).
  type: dict
"""


from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter


class FilterModule:
    def filters(self):
        return {"gcp_tcpx_plan": role_plan_filter("gcp_tcpx", module_utils("gcp_tcpx"))}
