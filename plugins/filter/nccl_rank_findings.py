# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: nccl_rank_findings
author: gpufabric developers
version_added: "0.9.0"
short_description: Judge the NCCL every node of a verify run loads
description:
  - Takes, per node of the run, the real path libnccl.so.2 resolves to under the job's environment (its
    C(LD_LIBRARY_PATH), then the loader's cache), the NCCL version each output's launching rank printed, and the
    plan's pin (the nccl role's package version).
  - Returns C(fail) (nodes on different NCCL versions), C(warn) (a node without the library, a launcher reporting a
    version no node loads, a version other than the pin) and C(info) reasons.
positional: reported, pin
options:
  _input:
    description: Node name -> the real path of its libnccl.so.2, or an empty string when none resolved.
    type: dict
    required: true
  reported:
    description:
      - The NCCL version each output's launching rank printed (C(nccl_version) of the parsed runs).
      - Null where it printed none.
    type: list
    elements: str
    required: true
  pin:
    description: The plan's NCCL package version (C(gpufabric_plan.nccl.version)); empty when the plan has none.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Judge the NCCL of the run's nodes
  ansible.builtin.debug:
    msg: >-
      {{ {'node-a': '/usr/lib/x86_64-linux-gnu/libnccl.so.2.27.5'}
         | gpufabric.cluster.nccl_rank_findings(['2.27.5'], '2.27.5-1+cuda12.9') }}
"""

RETURN = r"""
_value:
  description: Lists of reasons under C(fail), C(warn) and C(info) (info reasons start with C(info:)).
  type: dict
"""

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import require_dict

nccl = module_utils("nccl")


def nccl_rank_findings(loaded, reported, pin):
    return nccl.rank_findings(
        {
            str(node): str(path or "")
            for node, path in require_dict(loaded, "nccl_rank_findings", "node -> path").items()
        },
        [str(version) if version else None for version in reported or []],
        str(pin or ""),
    )


class FilterModule:
    def filters(self):
        return {"nccl_rank_findings": nccl_rank_findings}
