#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_facts
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Read a host's GPUs, NICs and RDMA devices from sysfs and procfs
description:
  - Reads the GPUs, NVSwitches, network interfaces and RDMA devices of a host from C(/sys) and C(/proc),
    with their PCI ids, drivers, NUMA nodes, PCIe switches, link states, speeds and MTUs.
  - Reports which NICs and RDMA devices share a PCIe switch or a NUMA node with each GPU, the loaded
    kernel modules that matter to GPU networking, and the NVIDIA and mlx5 driver versions.
  - Only reads; it never changes the host. A value it cannot read is null and listed in C(unreadable)
    with the reason, instead of failing the task.
  - Loopback and virtual network interfaces (bridges, veth, tunnels) are left out.
options:
  root:
    description:
      - Directory that holds the C(sys), C(proc) and C(etc) trees to read.
      - Use it for a host's root mounted elsewhere, for example inside a container.
    type: path
    default: /
  packages:
    description:
      - Also read the installed GPU and network stack packages from dpkg's database (C(host.packages)) and AWS's
        EFA installer record (C(host.efa_installer)), as C(gpufabric plan --probe) does; off by default, since the
        facts are copied into every later task of a play.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check mode and return the changed status it predicts without changing the target.
    support: full
  diff_mode:
    description: Returns details on what has changed (or, in check mode, would change) in diff mode.
    support: none
  idempotent:
    description: Run again with the same arguments, it changes nothing and reports C(changed=false).
    support: full
"""

EXAMPLES = r"""
- name: Read the GPU and network hardware
  gpufabric.cluster.fabric_facts:

- name: Read the host's hardware from inside a container that mounts it at /host
  gpufabric.cluster.fabric_facts:
    root: /host

- name: Every GPU-network InfiniBand port is up
  ansible.builtin.assert:
    that: item.ports[0].state == 'ACTIVE'
  loop: "{{ ansible_facts.gpufabric_hardware.rdma_devices }}"
  loop_control:
    label: "{{ item.name }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    gpufabric_hardware:
      description: The hardware found under O(root).
      returned: always
      type: dict
      contains:
        root:
          description: The O(root) read.
          type: str
          sample: /
        gpus:
          description:
            - NVIDIA GPUs (PCI class 3D or VGA controller), sorted by PCI address.
            - Each has C(pci_address), C(pci_id), C(model) (C(H100), C(H200), C(B200), C(A100) or C(unknown)),
              C(numa_node), C(driver) and C(pcie_switch) (PCI address of the upstream port of the PCIe switch the
              GPU sits behind; null when it hangs off a root port).
          type: list
          elements: dict
          sample:
            - pci_address: "0000:19:00.0"
              pci_id: "10de:2330"
              model: H100
              numa_node: 0
              driver: nvidia
              pcie_switch: "0000:17:00.0"
        nvswitches:
          description:
            - PCI NVSwitches (HGX A100/H100/H200), sorted by PCI address, each with C(pci_address) and C(pci_id).
            - NVLink-5 baseboards (HGX B100/B200/B300) have none; their NVSwitches are reached through ConnectX-7
              bridge functions, listed in C(rdma_devices) with C(nvswitch_bridge) true.
          type: list
          elements: dict
        nics:
          description:
            - Hardware network interfaces (those with a C(device) link), sorted by name.
            - Each has C(name), C(pci_address), C(pci_id), C(driver), C(kind) (C(gvnic), C(connectx), C(efa),
              C(ena), C(virtio), C(mana) or C(unknown)), C(mtu), C(speed_mbps), C(operstate) (as the kernel reports
              it, usually C(up) or C(down)), C(numa_node), C(pcie_switch), C(sriov_totalvfs), C(sriov_numvfs) and
              C(is_virtual_function).
            - C(speed_mbps) is null when the link is down or the driver does not know its speed.
          type: list
          elements: dict
          sample:
            - name: eth1
              pci_address: "0000:1a:00.0"
              pci_id: "1ae0:0042"
              driver: gve
              kind: gvnic
              mtu: 8244
              speed_mbps: 200000
              operstate: up
              numa_node: 0
              pcie_switch: "0000:17:00.0"
              sriov_totalvfs: null
              sriov_numvfs: null
              is_virtual_function: false
        default_routes:
          description:
            - Interfaces with an IPv4 default route (C(/proc/net/route)), lowest metric first; the management NIC
              carries it, so a management NIC of kind C(vnic) (OCI) is the first of them. Empty when the table is
              absent (a simulated tree without one).
          type: list
          elements: str
          sample: [eth0]
        rdma_devices:
          description:
            - RDMA devices from C(/sys/class/infiniband), sorted by name.
            - Each has C(name), C(pci_address), C(pci_id), C(driver), C(kind) (as for C(nics)), C(netdev) (the
              RoCE or IPoIB interface; null for EFA), C(numa_node), C(pcie_switch), C(is_virtual_function) (an
              SR-IOV VF, such as GCP passes through or the sriov role creates), C(nvswitch_bridge) (true for an
              NVLink-5 baseboard's NVSwitch bridge function, whose PCI VPD carries C(SMDL=SW_MNG), not a NIC; null
              when the VPD of a ConnectX function could not be read, which needs root; read only on a GPU host
              without PCI NVSwitches, false elsewhere) and C(ports).
            - Each port has C(port), C(state) (C(ACTIVE), C(DOWN), ...), C(phys_state) (C(LinkUp), C(Disabled), ...),
              C(rate) (as the kernel prints it), C(rate_gbit_s), C(link_layer) (C(InfiniBand), C(Ethernet), or
              C(Unspecified) on EFA), C(gid_count) (GID table entries in use), C(gids) (each in-use entry's
              C(index), C(gid), C(type) such as C(RoCE v2) and C(netdev); type and netdev are null on
              InfiniBand), C(lid) and C(sm_lid) (integers; 0 on an InfiniBand port means no subnet manager
              configured it) and C(pkeys) (non-empty P_Key table entries such as C(0xffff)).
          type: list
          elements: dict
          sample:
            - name: mlx5_0
              pci_address: "0000:1a:00.0"
              pci_id: "15b3:1021"
              driver: mlx5_core
              kind: connectx
              netdev: ibp26s0
              numa_node: 0
              pcie_switch: "0000:17:00.0"
              is_virtual_function: false
              nvswitch_bridge: false
              ports:
                - port: 1
                  state: ACTIVE
                  phys_state: LinkUp
                  rate: 400 Gb/sec (4X NDR)
                  rate_gbit_s: 400.0
                  link_layer: InfiniBand
                  gid_count: 1
                  gids:
                    - {index: 0, gid: "fe80:0000:0000:0000:0200:00ff:fe00:0001", type: null, netdev: null}
                  lid: 2
                  sm_lid: 1
                  pkeys: ["0xffff"]
        affinity:
          description:
            - Per GPU (C(gpu), its PCI address), the names of the NICs and RDMA devices on its PCIe switch
              (C(same_switch)) and on its NUMA node (C(same_numa)).
          type: list
          elements: dict
          sample:
            - gpu: "0000:19:00.0"
              same_switch: [ibp26s0, mlx5_0]
              same_numa: [ibp26s0, ibp27s0, mlx5_0, mlx5_1]
        host:
          description:
            - C(kernel) (release), C(os) (C(id), C(version_id), C(pretty_name) from os-release; empty when absent),
              C(secure_boot) (true, false, or null without EFI), C(modules) (whether each of C(nvidia),
              C(nvidia_peermem), C(nvidia_uvm), C(ib_core), C(mlx5_core), C(mlx5_ib), C(ib_umad), C(efa) and
              C(gve) is loaded), C(nvidia_driver_version) and C(mlx5_core_version) (null when not reported),
              C(packages) (with O(packages), the installed GPU and network stack packages and their versions, from
              dpkg's database below O(root); null without one, as on RPM hosts, and without O(packages)),
              C(efa_installer) (with O(packages), the text of C(/opt/amazon/efa_installed_packages), empty when
              absent; null without O(packages)).
          type: dict
        unreadable:
          description:
            - What could not be read, each with C(path) (below O(root)) and C(reason).
            - Files a device may legitimately lack (for example C(sriov_totalvfs)) are not listed.
          type: list
          elements: dict
          sample:
            - path: /sys/class/net/eth3/speed
              reason: invalid value '-1'
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.cluster.plugins.module_utils.hw_facts import gather


def main() -> None:
    module = AnsibleModule(
        argument_spec={"root": {"type": "path", "default": "/"}, "packages": {"type": "bool", "default": False}},
        supports_check_mode=True,
    )
    facts = gather(module.params["root"], packages=module.params["packages"])
    module.exit_json(changed=False, ansible_facts={"gpufabric_hardware": facts})


if __name__ == "__main__":
    main()
