# SPDX-License-Identifier: Apache-2.0
"""Write SIMULATED sysfs/procfs trees that look like a catalog profile's hardware.

There is no GPU, NIC or RDMA device on the machines that build and test
gpufabric, so the tests (and later a local lab) point ``hw_facts.gather`` at a
tree written here instead of "/". Nothing in a production path may use it: the
tree carries a ``SIMULATED`` file at its root to say so.

The layout follows real Linux: devices live under ``sys/devices/pci<domain>:<bus>/``
below their root port and PCIe switch, and ``sys/bus/pci/devices``,
``sys/class/net`` and ``sys/class/infiniband`` link into that hierarchy. Every
symlink is relative, so a tree can be moved or bind-mounted anywhere.

How a profile becomes hardware:

- GPUs sit two per PCIe switch; the first half of them on NUMA node 0, the rest on 1.
- GPU-network NICs are dealt round-robin over those switches, so every GPU's switch has one.
- NVSwitches and the management NICs each hang off their own root port (no switch), management first, so the
  management NICs come first on the bus as GCP's control gVNIC does; the first carries the default route
  (``proc/net/route``).
- Interface names are an image's, never the catalog's (which has none): ``nic_names`` gives them per NIC group in
  PCI order (tests/fixtures/nic_names.yml holds the real images' names, with their sources); without it, the
  kernel's names: gVNICs ``eth0``, ``eth1``, ... in PCI order (as Container-Optimized OS or ``net.ifnames=0``),
  an ENA ``ens5``, other management NICs ``eno1``, ConnectX netdevs by PCI path.
- ``nics.gpu.kind`` picks the device: gVNIC netdevs; ConnectX RDMA devices with a
  RoCE or IPoIB netdev (virtual functions on GCP, as GCP passes them through);
  EFA RDMA devices without a netdev; plain ConnectX netdevs for ``ethernet``.
- ConnectX physical functions outside GCP are SR-IOV capable when the profile declares
  ``sriov`` (``sriov_totalvfs`` 16) or ``write_tree(sriov_totalvfs=N)`` asks for it; every
  ConnectX RDMA device has a ``node_guid``. ``simulated_sriov`` plays the kernel for them.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_GPU_ID = "10de:2330"
NVSWITCH_ID = "10de:22a3"
NVSWITCHES = 4
GVNIC_ID = "1ae0:0042"
CONNECTX_ID = "15b3:1021"  # ConnectX-7
CONNECTX_VF_ID = "15b3:101e"  # ConnectX family virtual function
CONNECTX_MANAGEMENT_ID = "15b3:101d"  # ConnectX-6 Dx
DEFAULT_SRIOV_TOTALVFS = 16  # for a profile that declares sriov; ConnectX firmware NUM_OF_VFS is a site choice
EFA_ID = "1d0f:efa1"
ENA_ID = "1d0f:ec20"
VIRTIO_NET_ID = "1af4:1041"
# Bridge ids are placeholders: gather() reads only the class of a bridge.
ROOT_PORT_ID = "8086:0000"
SWITCH_PORT_ID = "1000:c030"

GPU_CLASS = "0x030200"
NVSWITCH_CLASS = "0x068000"
ETHERNET_CLASS = "0x020000"
INFINIBAND_CLASS = "0x020700"
BRIDGE_CLASS = "0x060400"

RDMA_FABRICS = ("infiniband", "roce", "gpudirect_rdma")
CONNECTX_NIC_KINDS = ("connectx_ib", "connectx_roce")
RDMA_NIC_KINDS = (*CONNECTX_NIC_KINDS, "efa")
IPOIB_MTU = 4092
DEFAULT_MANAGEMENT_SPEED_GBIT_S = 100
NVIDIA_DRIVER_VERSION = "570.133.20"
MLX5_CORE_VERSION = "24.10-1.1.4"
KERNEL = "6.1.0-28-amd64"
OS_RELEASE = """PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
"""
# Management NICs the clouds' images leave at the kernel's names (eth0, ...): GCP's gVNIC on COS, Azure's
# synthetic (VMBus) NIC beside its accelerated-networking VF, which has no PCI path to name it by, OCI's VNIC as
# Oracle's images name it.
KERNEL_NAMED_MANAGEMENT = ("gvnic", "accelnet", "vnic")
SECURE_BOOT_VAR = "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
# The PCIe link every simulated GPU and GPU-network NIC trained at, as its sysfs link files print it (the kernel's
# pci_speed_string: "32.0 GT/s PCIe" is Gen5). SIMULATED: one value for every device; real devices differ.
PCIE_LINK_SPEED = "32.0 GT/s PCIe"
PCIE_LINK_WIDTH = 16


@dataclass
class Faults:
    """Ways a simulated host departs from its profile. NIC indexes count GPU-network NICs from 0."""

    gpus_missing: int = 0  # drop the last N GPUs
    nics_missing: int = 0  # drop the last N GPU-network NICs (PCI function, netdev and RDMA device)
    # This NIC's link is down: netdev operstate down, carrier 0, speed -1 (what drivers report
    # when they do not know the speed); an RDMA port reads "1: DOWN" / "3: Disabled".
    nic_down: int | None = None
    ib_port_rate_gbit_s: tuple[int, int] | None = None  # (index, rate): that RDMA device's port 1 trained lower
    mtu: tuple[int, int] | None = None  # (index, mtu): that GPU-network netdev's MTU
    # Left out of proc/modules and sys/module (and proc/driver/nvidia for nvidia). Devices keep
    # their driver links, so this models a missing add-on such as nvidia_peermem faithfully.
    modules_missing: tuple[str, ...] = ()
    # No subnet manager on the InfiniBand fabric: ports train (LinkUp) but stay INIT with LID 0.
    no_subnet_manager: bool = False
    # (GPU index, lanes): that GPU's PCIe link trained narrower than its max_link_width (x16).
    gpu_link_width: tuple[int, int] | None = None
    # (NIC index, count): that ConnectX RDMA device's port 1 counters/link_downed (0 on the others).
    link_downed: tuple[int, int] | None = None


def management_interfaces(profile: dict[str, Any], nic_names: dict[str, list[str]] | None = None) -> list[str]:
    """Names of the simulated management netdevs, in PCI order: ``nic_names["management"]``, else the kernel's."""
    management = profile["nics"]["management"]
    count = management.get("count", 1)
    given = list((nic_names or {}).get("management") or [])
    if given:
        return given[:count]
    if management["kind"] in KERNEL_NAMED_MANAGEMENT:
        return [f"eth{index}" for index in range(count)]
    first = {"ena": "ens5"}.get(management["kind"], "eno1")
    return [first] + [f"{first}_{index}" for index in range(1, count)]


def management_interface(profile: dict[str, Any], nic_names: dict[str, list[str]] | None = None) -> str:
    """Name of the (first) simulated management netdev."""
    return management_interfaces(profile, nic_names)[0]


def check_nic_names(profile: dict[str, Any], nic_names: dict[str, list[str]] | None) -> None:
    """Refuse names that do not fit the profile: a group it lacks, or another count than the group's."""
    connectx = profile["nics"]["gpu"]["kind"] in CONNECTX_NIC_KINDS
    for group, names in (nic_names or {}).items():
        section = "gpu" if group == "gpu_rdma" else group
        if section not in profile["nics"] or (group == "gpu_rdma" and not connectx):
            raise ValueError(
                f"nic_names: the profile has no NIC group {group!r}; accepted: gpu, management, gpu_rdma (ConnectX)"
            )
        count = profile["nics"][section].get("count", 1)
        if names and len(names) != count:
            raise ValueError(f"nic_names[{group!r}]: {len(names)} names for {count} NICs")


def rate_string(gbit_s: float, kind: str) -> str:
    """The RDMA port ``rate`` file: EFA states the number only, ConnectX adds width and speed."""
    number = f"{gbit_s:g}"
    if kind == "efa":
        return f"{number} Gb/sec"
    generation = {400: "4X NDR", 200: "4X HDR", 100: "4X EDR"}.get(int(gbit_s)) if gbit_s == int(gbit_s) else None
    return f"{number} Gb/sec ({generation})" if generation else f"{number} Gb/sec"


# ---------------------------------------------------------------------------
# Writing the tree
# ---------------------------------------------------------------------------


class _Tree:
    """Files, relative symlinks and PCI functions below a root; paths are relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.next_bus = 0x10
        self.macs = 0
        self.guids = 0

    def file(self, path: str, content: str | bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")

    def link(self, path: str, target: str) -> None:
        link = self.root / path
        link.parent.mkdir(parents=True, exist_ok=True)
        (self.root / target).mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(self.root / target, link.parent))

    def buses(self, count: int) -> int:
        """Reserve ``count`` consecutive bus numbers of domain 0000."""
        first, self.next_bus = self.next_bus, self.next_bus + count
        if self.next_bus > 0x100:
            raise ValueError("the profile has more devices than one simulated PCI domain holds")
        return first

    def pci_function(
        self,
        parent: str,
        address: str,
        pci_id: str,
        pci_class: str,
        numa_node: int,
        driver: str | None,
        extra: dict[str, str] | None = None,
    ) -> str:
        path = f"{parent}/{address}"
        vendor, device = pci_id.split(":")
        self.file(f"{path}/vendor", f"0x{vendor}\n")
        self.file(f"{path}/device", f"0x{device}\n")
        self.file(f"{path}/class", f"{pci_class}\n")
        self.file(f"{path}/numa_node", f"{numa_node}\n")
        for name, value in (extra or {}).items():
            self.file(f"{path}/{name}", f"{value}\n")
        if driver:
            self.link(f"{path}/driver", f"sys/bus/pci/drivers/{driver}")
        self.link(f"sys/bus/pci/devices/{address}", path)
        return path

    def root_port(self, numa_node: int) -> tuple[str, int]:
        """A root port with nothing else between it and the device: (parent dir, device bus)."""
        bus = self.buses(2)
        port = self.pci_function(
            f"sys/devices/pci0000:{bus:02x}", f"0000:{bus:02x}:01.0", ROOT_PORT_ID, BRIDGE_CLASS, numa_node, "pcieport"
        )
        return port, bus + 1

    def pcie_switch(self, numa_node: int, slots: int) -> list[tuple[str, int]]:
        """Root port, switch upstream port, ``slots`` downstream ports: (parent dir, bus) per slot."""
        if slots > 32:
            raise ValueError("a simulated PCIe switch has at most 32 downstream ports")
        bus = self.buses(3 + slots)
        port = self.pci_function(
            f"sys/devices/pci0000:{bus:02x}", f"0000:{bus:02x}:01.0", ROOT_PORT_ID, BRIDGE_CLASS, numa_node, "pcieport"
        )
        upstream = self.pci_function(
            port, f"0000:{bus + 1:02x}:00.0", SWITCH_PORT_ID, BRIDGE_CLASS, numa_node, "pcieport"
        )
        downstream = [
            self.pci_function(
                upstream, f"0000:{bus + 2:02x}:{slot:02x}.0", SWITCH_PORT_ID, BRIDGE_CLASS, numa_node, "pcieport"
            )
            for slot in range(slots)
        ]
        return [(parent, bus + 3 + slot) for slot, parent in enumerate(downstream)]

    def netdev(self, device: str, name: str, mtu: int, speed_mbps: int, up: bool, infiniband: bool = False) -> None:
        path = f"{device}/net/{name}"
        self.macs += 1
        self.file(f"{path}/address", f"02:00:00:00:{self.macs >> 8:02x}:{self.macs & 0xFF:02x}\n")
        self.file(f"{path}/type", "32\n" if infiniband else "1\n")
        self.file(f"{path}/mtu", f"{mtu}\n")
        self.file(f"{path}/speed", f"{speed_mbps if up else -1}\n")
        self.file(f"{path}/operstate", "up\n" if up else "down\n")
        self.file(f"{path}/carrier", "1\n" if up else "0\n")
        self.link(f"{path}/device", device)
        self.link(f"sys/class/net/{name}", path)

    def pcie_link(self, device: str, width: int = PCIE_LINK_WIDTH) -> None:
        """The device's negotiated PCIe link (current_*) and what it and its slot can do (max_*)."""
        self.file(f"{device}/current_link_speed", f"{PCIE_LINK_SPEED}\n")
        self.file(f"{device}/max_link_speed", f"{PCIE_LINK_SPEED}\n")
        self.file(f"{device}/current_link_width", f"{width}\n")
        self.file(f"{device}/max_link_width", f"{PCIE_LINK_WIDTH}\n")

    def rdma_device(
        self,
        device: str,
        name: str,
        link_layer: str,
        rate: str,
        up: bool,
        netdev: str | None,
        subnet_manager: bool,
        link_downed: int = 0,
    ) -> None:
        path = f"{device}/infiniband/{name}"
        port = f"{path}/ports/1"
        infiniband = link_layer == "InfiniBand"
        # An InfiniBand port without a subnet manager trains (LinkUp) but stays INIT with LID 0.
        active = up and (subnet_manager or not infiniband)
        self.file(f"{path}/node_type", "1: CA\n")
        if link_layer != "Unspecified":  # ConnectX (EFA reads Unspecified): a unique node GUID, Mellanox OUI b8:ce:f6
            self.file(f"{path}/node_guid", f"b8ce:f603:0012:{self.guids + 1:04x}\n")
        self.file(f"{port}/state", "4: ACTIVE\n" if active else ("2: INIT\n" if up else "1: DOWN\n"))
        self.file(f"{port}/phys_state", "5: LinkUp\n" if up else "3: Disabled\n")
        self.file(f"{port}/rate", f"{rate}\n")
        self.file(f"{port}/link_layer", f"{link_layer}\n")
        if link_layer != "Unspecified":  # the InfiniBand port counters ConnectX keeps (EFA keeps hw_counters only)
            self.file(f"{port}/counters/link_downed", f"{link_downed}\n")
            self.file(f"{port}/counters/symbol_error", "0\n")
        self.guids += 1
        # LIDs are assigned by the subnet manager (the SM here has LID 1); Ethernet ports read 0x0.
        self.file(f"{port}/lid", f"0x{self.guids + 1:x}\n" if infiniband and active else "0x0\n")
        self.file(f"{port}/sm_lid", "0x1\n" if infiniband and active else "0x0\n")
        # P_Key table: the default full-membership partition, the rest empty.
        for index in range(4):
            self.file(f"{port}/pkeys/{index}", "0xffff\n" if index == 0 else "0x0000\n")
        # A GID table of fixed size; unused entries read as zeros. RoCE has a v1 and a v2 GID per
        # address (link-local IPv6, then the IPv4-mapped address, so index 3 is RoCE v2 over IPv4 as
        # on real hosts), each naming its netdev and type. InfiniBand GIDs have neither: those
        # files read EINVAL there, so they are not written.
        link_local = f"fe80:0000:0000:0000:0200:00ff:fe00:{self.guids:04x}"
        ipv4_mapped = f"0000:0000:0000:0000:0000:ffff:0a00:{self.guids:04x}"
        valid: list[tuple[str, str | None]]
        if infiniband:
            valid = [(link_local, None)]
        else:
            valid = [(link_local, "IB/RoCE v1"), (link_local, "RoCE v2"), (ipv4_mapped, "IB/RoCE v1")]
            valid.append((ipv4_mapped, "RoCE v2"))
        for index in range(8):
            gid, gid_type = valid[index] if index < len(valid) else ("0000:" * 7 + "0000", None)
            self.file(f"{port}/gids/{index}", f"{gid}\n")
            if netdev and gid_type:
                self.file(f"{port}/gid_attrs/ndevs/{index}", f"{netdev}\n")
                self.file(f"{port}/gid_attrs/types/{index}", f"{gid_type}\n")
        self.link(f"{path}/device", device)
        self.link(f"sys/class/infiniband/{name}", path)


# ---------------------------------------------------------------------------
# The profile's devices
# ---------------------------------------------------------------------------


def _gpu_nic(
    tree: _Tree,
    profile: dict[str, Any],
    index: int,
    slot: tuple[str, int],
    numa: int,
    faults: Faults,
    sriov_totalvfs: int | None = None,
    interface: str | None = None,
    rdma_name: str | None = None,
) -> None:
    """GPU-network NIC number ``index`` in its switch slot, as ``nics.gpu.kind`` says; ``interface``: its
    netdev's name (None: the kernel's); ``rdma_name``: a ConnectX NIC's RDMA device name (None: the profile's
    ``rdma_devices`` entry, else the kernel's mlx5_<index>).

    ``sriov_totalvfs``: ConnectX physical functions (outside GCP) get SR-IOV files with that total; None: none.
    """
    spec = profile["nics"]["gpu"]
    kind, cloud = spec["kind"], profile["cloud"]
    parent, bus = slot
    address = f"0000:{bus:02x}:00.0"
    pci_id = (spec.get("pci_ids") or [None])[0]
    rdma_names = spec.get("rdma_devices") or []
    up = faults.nic_down != index
    speed_mbps = round(spec["speed_gbit_s"] * 1000)
    rate_gbit_s = spec["speed_gbit_s"]
    if faults.ib_port_rate_gbit_s and faults.ib_port_rate_gbit_s[0] == index:
        rate_gbit_s = faults.ib_port_rate_gbit_s[1]
    mtu_override = faults.mtu[1] if faults.mtu and faults.mtu[0] == index else None
    sriov = None
    if sriov_totalvfs is not None:
        sriov = {
            "sriov_totalvfs": str(sriov_totalvfs),
            "sriov_numvfs": "0",
            "sriov_offset": "1",
            "sriov_stride": "1",
            "sriov_vf_device": CONNECTX_VF_ID.split(":")[1],
        }

    def name(names: list[str], default: str) -> str:
        return str(names[index]) if index < len(names) else default

    link_downed = faults.link_downed[1] if faults.link_downed and faults.link_downed[0] == index else 0
    if kind == "gvnic":
        device = tree.pci_function(parent, address, pci_id or GVNIC_ID, ETHERNET_CLASS, numa, "gve")
        tree.pcie_link(device)
        mtu = mtu_override or spec.get("mtu", 1500)
        tree.netdev(device, interface or f"eth{index + 1}", mtu, speed_mbps, up)
    elif kind == "efa":
        device = tree.pci_function(parent, address, pci_id or EFA_ID, ETHERNET_CLASS, numa, "efa")
        tree.pcie_link(device)
        rate = rate_string(rate_gbit_s, "efa")
        tree.rdma_device(device, f"rdmap{bus}s0", "Unspecified", rate, up, None, subnet_manager=True)
    elif kind == "ethernet":
        device = tree.pci_function(parent, address, pci_id or CONNECTX_ID, ETHERNET_CLASS, numa, "mlx5_core", sriov)
        tree.pcie_link(device)
        mtu = mtu_override or spec.get("mtu", 1500)
        tree.netdev(device, interface or f"enp{bus}s0np0", mtu, speed_mbps, up)
    else:  # connectx_ib, connectx_roce
        infiniband = kind == "connectx_ib"
        pci_class = INFINIBAND_CLASS if infiniband else ETHERNET_CLASS
        if cloud == "gcp":
            # GCP passes a virtual function through; its physical function sits next to it.
            physical = tree.pci_function(
                parent, address, CONNECTX_ID, pci_class, numa, "mlx5_core", {"sriov_totalvfs": "1", "sriov_numvfs": "1"}
            )
            device = tree.pci_function(
                parent, f"0000:{bus:02x}:00.1", pci_id or CONNECTX_VF_ID, pci_class, numa, "mlx5_core"
            )
            tree.link(f"{device}/physfn", physical)
            tree.link(f"{physical}/virtfn0", device)
            netdev = interface or f"enp{bus}s0f1"
        else:
            device = tree.pci_function(parent, address, pci_id or CONNECTX_ID, pci_class, numa, "mlx5_core", sriov)
            netdev = interface or (f"ibp{bus}s0" if infiniband else f"enp{bus}s0np0")
        tree.pcie_link(device)
        mtu = mtu_override or spec.get("mtu", IPOIB_MTU if infiniband else 1500)
        tree.netdev(device, netdev, mtu, speed_mbps, up, infiniband=infiniband)
        link_layer = "InfiniBand" if infiniband else "Ethernet"
        rate = rate_string(rate_gbit_s, "connectx")
        tree.rdma_device(
            device,
            rdma_name or name(rdma_names, f"mlx5_{index}"),
            link_layer,
            rate,
            up,
            None if infiniband else netdev,
            subnet_manager=not faults.no_subnet_manager,
            link_downed=link_downed,
        )


def _management_nic(tree: _Tree, profile: dict[str, Any], name: str, index: int) -> None:
    management = profile["nics"]["management"]
    kind = management["kind"]
    speed_mbps = round(management.get("speed_gbit_s", DEFAULT_MANAGEMENT_SPEED_GBIT_S) * 1000)
    parent, bus = tree.root_port(numa_node=0)
    address = f"0000:{bus:02x}:00.0"
    if kind == "gvnic":
        device = tree.pci_function(parent, address, GVNIC_ID, ETHERNET_CLASS, 0, "gve")
        tree.netdev(device, name, 1500, speed_mbps, up=True)
    elif kind == "ena":
        device = tree.pci_function(parent, address, ENA_ID, ETHERNET_CLASS, 0, "ena")
        tree.netdev(device, name, 1500, speed_mbps, up=True)
    elif profile["cloud"] == "azure":
        # Accelerated networking: a ConnectX function with its own Ethernet RDMA device, not part of the fabric.
        device = tree.pci_function(parent, address, CONNECTX_MANAGEMENT_ID, ETHERNET_CLASS, 0, "mlx5_core")
        tree.netdev(device, name, 1500, speed_mbps, up=True)
        tree.rdma_device(
            device,
            f"mlx5_an{index}",
            "Ethernet",
            rate_string(speed_mbps / 1000, "connectx"),
            True,
            name,
            subnet_manager=True,
        )
    else:
        # virtio-net: the netdev hangs below a virtio device inside the PCI function, as on real hosts.
        device = tree.pci_function(parent, address, VIRTIO_NET_ID, ETHERNET_CLASS, 0, "virtio-pci")
        virtio = f"{device}/virtio{index}"
        tree.link(f"{virtio}/driver", "sys/bus/virtio/drivers/virtio_net")
        tree.netdev(virtio, name, 1500, speed_mbps, up=True)


def loaded_modules(profile: dict[str, Any], faults: Faults) -> list[str]:
    """Kernel modules the simulated host has loaded."""
    modules = ["nvidia", "nvidia_uvm", "nvidia_modeset"]
    if profile["cloud"] == "gcp":
        modules.append("gve")
    if profile["cloud"] == "aws":
        modules.append("ena")
    if profile["fabric"] in RDMA_FABRICS:
        modules += ["mlx5_core", "mlx5_ib", "ib_core", "ib_umad", "nvidia_peermem"]
    elif profile["nics"]["gpu"]["kind"] == "ethernet":
        modules.append("mlx5_core")
    if profile["fabric"] == "efa":
        modules += ["efa", "ib_core"]
    if profile["nics"]["management"]["kind"] not in ("gvnic", "ena") and profile["cloud"] != "azure":
        modules.append("virtio_net")
    return [module for module in dict.fromkeys(modules) if module not in faults.modules_missing]


def _host(tree: _Tree, modules: list[str]) -> None:
    tree.file("proc/sys/kernel/osrelease", f"{KERNEL}\n")
    tree.file("etc/os-release", OS_RELEASE)
    tree.file(SECURE_BOOT_VAR, bytes([0x06, 0, 0, 0, 0]))  # attributes, then 0: Secure Boot off
    tree.file("proc/modules", "".join(f"{module} 65536 0 - Live 0x0000000000000000\n" for module in modules))
    for module in modules:
        tree.file(f"sys/module/{module}/initstate", "live\n")
    if "nvidia" in modules:
        tree.file(
            "proc/driver/nvidia/version",
            f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {NVIDIA_DRIVER_VERSION}  Fri Mar 14 00:00:00 UTC 2025\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
        )
        tree.file("sys/module/nvidia/version", f"{NVIDIA_DRIVER_VERSION}\n")
    if "mlx5_core" in modules:
        tree.file("sys/module/mlx5_core/version", f"{MLX5_CORE_VERSION}\n")


def _check_faults(profile: dict[str, Any], faults: Faults) -> None:
    """Refuse a fault that names a NIC the profile does not have or a property it lacks."""
    count, kind = profile["nics"]["gpu"]["count"], profile["nics"]["gpu"]["kind"]
    if faults.gpus_missing < 0 or faults.nics_missing < 0:
        raise ValueError("gpus_missing and nics_missing must be >= 0")
    for field, index in (
        ("nic_down", faults.nic_down),
        ("ib_port_rate_gbit_s", faults.ib_port_rate_gbit_s and faults.ib_port_rate_gbit_s[0]),
        ("mtu", faults.mtu and faults.mtu[0]),
    ):
        if index is not None and not 0 <= index < count:
            raise ValueError(f"Faults.{field}: NIC index {index} is out of range; the profile has {count} GPU NICs")
    if faults.ib_port_rate_gbit_s and kind not in RDMA_NIC_KINDS:
        raise ValueError(f"Faults.ib_port_rate_gbit_s: {kind} NICs have no RDMA port")
    if faults.mtu and kind == "efa":
        raise ValueError("Faults.mtu: EFA devices have no netdev")
    if faults.link_downed is not None:
        if not 0 <= faults.link_downed[0] < count:
            raise ValueError(f"Faults.link_downed: NIC index {faults.link_downed[0]} is out of range")
        if kind not in CONNECTX_NIC_KINDS:
            raise ValueError(f"Faults.link_downed: {kind} NICs have no InfiniBand port counters here")
    gpus = profile["gpu"]["count"]
    if faults.gpu_link_width is not None and not 0 <= faults.gpu_link_width[0] < gpus:
        raise ValueError(f"Faults.gpu_link_width: GPU index {faults.gpu_link_width[0]} is out of range; {gpus} GPUs")


def write_tree(
    profile: dict[str, Any],
    root: Path,
    faults: Faults | None = None,
    sriov_totalvfs: int | None = None,
    nic_names: dict[str, list[str]] | None = None,
) -> Path:
    """Write the simulated tree for one validated catalog profile into ``root`` (absent or empty).

    ``sriov_totalvfs``: what ConnectX physical functions outside GCP report (0 = not SR-IOV capable); None:
    16 when the profile declares ``sriov``, else they have no SR-IOV files.
    ``nic_names``: the interface names an image gives the NIC groups, {"gpu": [...], "management": [...]}, and
    the RDMA device names of ConnectX GPU NICs ("gpu_rdma"), each in PCI order (tests/fixtures/nic_names.yml); a
    group left out gets the kernel's names.
    """
    faults = faults or Faults()
    _check_faults(profile, faults)
    check_nic_names(profile, nic_names)
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty")
    if sriov_totalvfs is None and profile.get("sriov"):
        sriov_totalvfs = DEFAULT_SRIOV_TOTALVFS
    if sriov_totalvfs is not None and sriov_totalvfs < 0:
        raise ValueError("sriov_totalvfs must be >= 0")
    root.mkdir(parents=True, exist_ok=True)
    tree = _Tree(root)
    name = f"{profile['cloud']}/{profile['instance_type']}"
    changed = {key: value for key, value in dataclasses.asdict(faults).items() if value != getattr(Faults(), key)}
    tree.file(
        "SIMULATED",
        f"Simulated hardware for profile {name}, written by gpufabric.simulated_hw; not a real host.\n"
        + (f"Faults: {changed}\n" if changed else ""),
    )
    _host(tree, loaded_modules(profile, faults))
    management = management_interfaces(profile, nic_names)
    for index, management_name in enumerate(management):
        _management_nic(tree, profile, management_name, index)
    # The first management NIC carries the default route, as on every cloud (what finds OCI's VNIC by identity).
    tree.file(
        "proc/net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        f"{management[0]}\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
        f"{management[0]}\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n",
    )

    gpu_count, nic_count = profile["gpu"]["count"], profile["nics"]["gpu"]["count"]
    gpu_id = profile["gpu"].get("pci_id", DEFAULT_GPU_ID)
    switches = math.ceil(gpu_count / 2)
    # (NIC index, slot, NUMA node): written once every slot is known, so that names follow the order on the bus.
    placed: list[tuple[int, tuple[str, int], int]] = []
    for switch in range(switches):
        gpus = [gpu for gpu in range(gpu_count) if gpu // 2 == switch]
        nics = [nic for nic in range(nic_count) if nic % switches == switch]
        numa = 0 if gpus[0] < math.ceil(gpu_count / 2) else 1
        slots = tree.pcie_switch(numa, len(gpus) + len(nics))
        # Missing devices still take their slot, so the others keep their addresses.
        for gpu, (parent, bus) in zip(gpus, slots, strict=False):
            if gpu < gpu_count - faults.gpus_missing:
                device = tree.pci_function(parent, f"0000:{bus:02x}:00.0", gpu_id, GPU_CLASS, numa, "nvidia")
                narrow = faults.gpu_link_width
                tree.pcie_link(device, narrow[1] if narrow and narrow[0] == gpu else PCIE_LINK_WIDTH)
        placed += [(nic, slot, numa) for nic, slot in zip(nics, slots[len(gpus) :], strict=True)]
    given = list((nic_names or {}).get("gpu") or [])
    given_rdma = list((nic_names or {}).get("gpu_rdma") or [])
    kind = profile["nics"]["gpu"]["kind"]
    for rank, (nic, slot, numa) in enumerate(sorted(placed, key=lambda item: item[1][1])):
        netdev: str | None = None  # None: the kernel's name by PCI path, or eth<index + 1>
        if given:
            netdev = given[rank]
        elif kind == "gvnic" and profile["nics"]["management"]["kind"] == "gvnic":
            netdev = f"eth{len(management) + rank}"  # the kernel's names: every gVNIC in PCI order, management first
        if nic < nic_count - faults.nics_missing:
            rdma_name = given_rdma[rank] if given_rdma else None
            _gpu_nic(tree, profile, nic, slot, numa, faults, sriov_totalvfs, netdev, rdma_name)

    if profile["gpu"]["nvswitch"]:
        for _switch in range(NVSWITCHES):
            parent, bus = tree.root_port(numa_node=0)
            tree.pci_function(parent, f"0000:{bus:02x}:00.0", NVSWITCH_ID, NVSWITCH_CLASS, 0, "nvidia")
    return root
