#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: sriov_vfs
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Set the SR-IOV virtual functions of a physical function and their addresses
description:
  - Sets the number of SR-IOV virtual functions (VFs) of one physical function (PF), named by its netdev or
    PCI address, and per VF its MAC address (Ethernet) or node and port GUIDs (InfiniBand), trust,
    spoof checking and VLAN.
  - Follows the kernel's rules. The VF count changes only through 0 (the kernel refuses to change one nonzero
    count into another), never above C(sriov_totalvfs), and nothing is written when it already matches.
  - Per-VF settings go through the PF with C(ip link set dev PF vf N ...), and only those that differ from what
    C(ip -j -d link show dev PF) reports are set. On InfiniBand a VF whose GUIDs changed is unbound from its
    driver and bound again (O(rebind)), which is when the new GUIDs take effect.
  - Everything is validated before the first write. A PF that does not exist, is a VF or is not SR-IOV capable,
    a count above C(sriov_totalvfs), a malformed, duplicate or wrong-kind address fails with one message and
    changes nothing.
  - The diff shows the VFs before and after; in check mode the after state and the actions are predicted.
  - The same code runs at boot from the C(gpufabric.cluster.sriov) role's config file, so VFs are re-created
    the same way after a reboot.
options:
  pf:
    description:
      - The physical function, as its network interface name (C(ibp12s0)) or PCI address (C(0000:0c:00.0);
        C(0c:00.0) means domain 0000).
    type: str
    required: true
  num_vfs:
    description:
      - Number of VFs wanted, 0 to C(sriov_totalvfs). 0 removes all VFs.
    type: int
    required: true
  address_scheme:
    description:
      - Where VF addresses come from.
      - C(derived) computes them from the PF, deterministically. Ethernet VF n gets MAC C(02:P2:P3:P4:P5:nn) (the
        PF MAC's octets 2 to 5, counted from 0, and n). InfiniBand VF n gets node and port GUID
        C(02:G3:G4:G5:G6:G7:hh:ll) (the 40 bits of the PF node GUID after the vendor OUI, then n + 1 as 16 bits).
        The leading C(02) marks a locally administered address. An address given in O(vfs) overrides it.
      - C(explicit) takes every VF's address from O(vfs); each VF needs one.
      - C(kernel) leaves addresses as the kernel and driver set them; O(vfs) may then give no address.
    type: str
    choices: [derived, explicit, kernel]
    default: derived
  vfs:
    description:
      - Per-VF settings. A VF not listed gets the scheme's address and the PF-wide O(trust), O(spoofchk) and
        O(vlan).
    type: list
    elements: dict
    default: []
    suboptions:
      index:
        description: VF number, 0 to O(num_vfs) - 1.
        type: int
        required: true
      mac:
        description: MAC address of an Ethernet VF (unicast, not all zero).
        type: str
      guid:
        description:
          - Node and port GUID of an InfiniBand VF, 8 octets (C(02:00:00:00:00:00:00:01)) or the sysfs form
            (C(0200:0000:0000:0001)). Not together with O(vfs[].node_guid) or O(vfs[].port_guid).
        type: str
      node_guid:
        description: Node GUID of an InfiniBand VF, as for O(vfs[].guid).
        type: str
      port_guid:
        description: Port GUID of an InfiniBand VF, as for O(vfs[].guid).
        type: str
      trust:
        description: Trust (Ethernet only); overrides O(trust).
        type: bool
      spoofchk:
        description: Spoof checking (Ethernet only); overrides O(spoofchk).
        type: bool
      vlan:
        description: VLAN id 0 to 4095 (0 untagged; Ethernet only); overrides O(vlan).
        type: int
  trust:
    description:
      - Trust for every VF (Ethernet only). Unset leaves it as it is.
    type: bool
  spoofchk:
    description:
      - Spoof checking for every VF (Ethernet only). Unset leaves it as it is.
    type: bool
  vlan:
    description:
      - VLAN id 0 to 4095 for every VF (0 untagged; Ethernet only). Unset leaves it as it is.
    type: int
  rebind:
    description:
      - Unbind and bind again the driver of an InfiniBand VF whose GUIDs changed, so they take effect.
      - With V(false) the new GUIDs are set but the VF keeps its old ones until its driver is reloaded.
    type: bool
    default: true
  sysfs_root:
    description:
      - Directory that holds the C(sys) tree to use, for example a host's root mounted inside a container.
    type: path
    default: /
  timeout:
    description:
      - Seconds to wait for the kernel to create or remove the VFs, and for each rebind.
    type: int
    default: 30
attributes:
  check_mode:
    description: Can run in check mode and return the changed status it predicts without changing the target.
    support: full
  diff_mode:
    description: Returns details on what has changed (or, in check mode, would change) in diff mode.
    support: full
  idempotent:
    description: Run again with the same arguments, it changes nothing and reports C(changed=false).
    support: full
notes:
  - Needs C(ip) from iproute2 5.5 or later to read InfiniBand VF GUIDs.
  - Enabling SR-IOV and the VF maximum in ConnectX firmware (C(SRIOV_EN), C(NUM_OF_VFS)) is the
    C(gpufabric.cluster.sriov) role's job (option C(sriov_firmware)); it needs a reboot.
  - Semantics follow the k8snetworkplumbingwg sriov-network-operator (VF count through 0, node and port GUID set
    through the PF, then an unbind and bind of the VF driver).
seealso:
  - name: Linux PCI sysfs SR-IOV attributes
    description: sriov_totalvfs, sriov_numvfs, sriov_offset, sriov_stride.
    link: https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci
"""

EXAMPLES = r"""
- name: Create 8 VFs on an InfiniBand HCA with GUIDs derived from its node GUID
  gpufabric.cluster.sriov_vfs:
    pf: ibp12s0
    num_vfs: 8

- name: Four trusted Ethernet VFs on VLAN 100 with fixed MACs for the first two
  gpufabric.cluster.sriov_vfs:
    pf: "0000:0c:00.0"
    num_vfs: 4
    trust: true
    spoofchk: false
    vlan: 100
    vfs:
      - {index: 0, mac: "02:00:00:0c:00:01"}
      - {index: 1, mac: "02:00:00:0c:00:02", vlan: 0}

- name: Explicit GUIDs from a site's address plan
  gpufabric.cluster.sriov_vfs:
    pf: "0000:0c:00.0"
    num_vfs: 2
    address_scheme: explicit
    vfs:
      - {index: 0, guid: "02:00:00:00:0c:00:00:01"}
      - {index: 1, guid: "0200:0000:0c00:0002"}

- name: Report what differs without changing anything
  gpufabric.cluster.sriov_vfs:
    pf: ibp12s0
    num_vfs: 8
  check_mode: true
  diff: true
  register: sriov_vfs__drift

- name: Remove all VFs
  gpufabric.cluster.sriov_vfs:
    pf: ibp12s0
    num_vfs: 0
"""

RETURN = r"""
pf:
  description: The physical function as resolved.
  returned: always
  type: dict
  contains:
    pci_address:
      description: Its PCI address.
      type: str
      sample: "0000:0c:00.0"
    netdev:
      description: Its network interface; null when it has none.
      type: str
      sample: ibp12s0
    link_type:
      description: C(infiniband) or C(ethernet).
      type: str
    totalvfs:
      description: C(sriov_totalvfs), the most VFs the device offers.
      type: int
      sample: 16
    numvfs:
      description: C(sriov_numvfs) before the task.
      type: int
    pf_mac:
      description: The PF's MAC address (Ethernet); null on InfiniBand.
      type: str
    pf_guid:
      description: The node GUID of the PF's RDMA device (InfiniBand); null on Ethernet.
      type: str
      sample: "b8:ce:f6:03:00:12:00:01"
    vf_driver:
      description: The driver VFs bind to (that of VF 0, else the PF's).
      type: str
      sample: mlx5_core
before:
  description:
    - The VFs before the task, C(num_vfs) and C(vfs).
    - Each VF has C(index), C(pci_address), C(driver) (null when unbound), C(mac) (Ethernet) or C(node_guid)
      and C(port_guid) (InfiniBand), C(trust), C(spoofchk) and C(vlan) as C(ip) reports them.
  returned: always
  type: dict
  sample:
    num_vfs: 1
    vfs:
      - index: 0
        pci_address: "0000:0c:00.1"
        driver: mlx5_core
        node_guid: "02:f6:03:00:12:00:00:01"
        port_guid: "02:f6:03:00:12:00:00:01"
        trust: false
        spoofchk: false
        vlan: 0
after:
  description:
    - The VFs after the task, as in RV(before); in check mode as predicted (values the kernel will choose,
      such as the addresses of new VFs under O(address_scheme=kernel), are null).
  returned: always
  type: dict
actions:
  description: One line per change made (or, in check mode, that would be made).
  returned: always
  type: list
  elements: str
  sample:
    - "0000:0c:00.0: sriov_numvfs 4 -> 0 -> 8"
    - "0000:0c:00.0: vf 0 node_guid 02:f6:03:00:12:00:00:01 (was 00:00:00:00:00:00:00:00)"
    - "0000:0c:00.0: vf 0 rebind 0000:0c:00.1 so the new GUIDs take effect"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.cluster.plugins.module_utils.sriov import Host, SriovError, apply_pf, state_text

VF_OPTIONS = {
    "index": {"type": "int", "required": True},
    "mac": {"type": "str"},
    "guid": {"type": "str"},
    "node_guid": {"type": "str"},
    "port_guid": {"type": "str"},
    "trust": {"type": "bool"},
    "spoofchk": {"type": "bool"},
    "vlan": {"type": "int"},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "pf": {"type": "str", "required": True},
            "num_vfs": {"type": "int", "required": True},
            "address_scheme": {"type": "str", "choices": ["derived", "explicit", "kernel"], "default": "derived"},
            "vfs": {"type": "list", "elements": "dict", "default": [], "options": VF_OPTIONS},
            "trust": {"type": "bool"},
            "spoofchk": {"type": "bool"},
            "vlan": {"type": "int"},
            "rebind": {"type": "bool", "default": True},
            "sysfs_root": {"type": "path", "default": "/"},
            "timeout": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    params = module.params
    host = Host(root=params["sysfs_root"], runner=module.run_command)
    host.ip_command = module.get_bin_path("ip") or "ip"
    settings = {key: params[key] for key in ("num_vfs", "address_scheme", "trust", "spoofchk", "vlan", "rebind")}
    settings |= {"vfs": params["vfs"] or [], "timeout": params["timeout"]}
    try:
        result = apply_pf(host, params["pf"], settings, check_mode=module.check_mode)
    except SriovError as error:
        module.fail_json(msg=str(error))
    module.exit_json(
        changed=result["changed"],
        pf=result["pf"],
        before=result["before"],
        after=result["after"],
        actions=result["actions"],
        diff={"before": state_text(result["pf"], result["before"]), "after": state_text(result["pf"], result["after"])},
    )


if __name__ == "__main__":
    main()
