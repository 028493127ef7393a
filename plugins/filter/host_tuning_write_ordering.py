# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: host_tuning_write_ordering
author: gpufabric developers
version_added: "0.9.0"
short_description: Compare each ConnectX function's PCI_WR_ORDERING (mstconfig query) with the wanted value
description:
  - Takes the output of the host_tuning role's query task (per ConnectX function a line C(### <pci>), the output of
    C(mstconfig -d <pci> -e q), stderr included, and a line C(### rc <exit status>)) and the wanted value,
    C(per_mkey) or C(force_relax), and returns per device the Next Boot value, the arguments after
    C(mstconfig -y -d <pci> set) that make it the wanted one (none when it is), and why a reboot (or C(mstfwreset))
    is needed when the running value differs.
  - The firmware lists PCI_WR_ORDERING only while ADVANCED_PCI_SETTINGS is true; a query without it reads as the
    firmware default C(per_mkey(0)), and C(force_relax) then sets ADVANCED_PCI_SETTINGS=1 in the same command.
options:
  _input:
    description: The query task's C(stdout).
    type: str
    required: true
  wanted:
    description: The wanted PCI_WR_ORDERING.
    type: str
    choices: [per_mkey, force_relax]
    required: true
"""

EXAMPLES = r"""
- name: Compare the firmware with the wanted write ordering
  ansible.builtin.set_fact:
    host_tuning__ordering: >-
      {{ host_tuning__queries.stdout | gpufabric.cluster.host_tuning_write_ordering('per_mkey') }}
"""

RETURN = r"""
_value:
  description:
    - C(devices) (per device C(device), C(shown), C(hidden), C(set_args), C(reboot)), C(reboot_required) (one reason
      per device whose running value differs) and C(errors) (a query that failed or printed no table).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils

host_tuning = module_utils("host_tuning")


def host_tuning_write_ordering(queries, wanted):
    if wanted not in host_tuning.WRITE_ORDERING:
        raise AnsibleFilterError(
            f"host_tuning_write_ordering: wanted {wanted!r} is not accepted; accepted: "
            + ", ".join(host_tuning.WRITE_ORDERING)
        )
    if not isinstance(queries, str):
        raise AnsibleFilterError(
            f"host_tuning_write_ordering: the input must be the query task's stdout, got {type(queries).__name__}"
        )
    return host_tuning.write_ordering_plan(queries, wanted)


class FilterModule:
    def filters(self):
        return {"host_tuning_write_ordering": host_tuning_write_ordering}
