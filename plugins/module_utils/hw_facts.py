# SPDX-License-Identifier: Apache-2.0
"""Read a host's GPUs, NICs and RDMA devices from sysfs and procfs under a root.

Shared by the ``fabric_facts`` module and the tests, so it uses the standard
library only and must run on the target's system Python (Debian 12/13). All
paths are read below ``root`` ("/" on a host, a simulated tree in tests, a bind
mount in a container).

``gather`` never raises on odd input: a value it cannot read becomes None and
the path, relative to ``root``, is listed in ``unreadable`` with the reason.
Files that are legitimately absent (``sriov_totalvfs`` on a device without
SR-IOV, ``physfn`` on a physical function, an unbound ``driver``) are not
reported; files every such device has (``vendor``, ``speed``, ``mtu``, port
``state``) are.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
HOST_BRIDGE = re.compile(r"^pci[0-9a-f]{4,}:[0-9a-f]{2}$")
HEX_ID = re.compile(r"^0x[0-9a-fA-F]{4}$")
INTEGER = re.compile(r"^-?[0-9]+$")
PORT = re.compile(r"^[0-9]+$")
RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*Gb/sec")
NVIDIA_VERSION = re.compile(r"Kernel Module\b.*?(\d+\.\d+(?:\.\d+)*)")

NVIDIA = "10de"
MELLANOX = "15b3"
# On NVLink-5 baseboards (HGX B100/B200/B300) the NVSwitches are no PCI devices: fabric manager and NVLSM reach them
# through ConnectX-7 bridge functions on the baseboard, InfiniBand devices whose PCI VPD carries SMDL=SW_MNG
# (NVIDIA Fabric Manager User Guide, as quoted in siderolabs/extensions nvidia-fabricmanager-wrapper/nvswitch.go).
NVSWITCH_BRIDGE_VPD = b"SMDL=SW_MNG"
GPU_CLASSES = ("0x0302", "0x0300")  # 3D controller (SXM/data centre), VGA controller
NVSWITCH_CLASS = "0x0680"
# Only ids whose model is certain; anything else is "unknown".
GPU_MODELS = {
    "10de:20b0": "A100",  # A100 SXM4 40GB
    "10de:20b2": "A100",  # A100 SXM4 80GB
    "10de:20b5": "A100",  # A100 PCIe 80GB
    "10de:20f1": "A100",  # A100 PCIe 40GB
    "10de:2330": "H100",  # H100 SXM5 80GB
    "10de:2331": "H100",  # H100 PCIe
    "10de:2335": "H200",  # H200 SXM 141GB
    "10de:2901": "B200",
    # GB200's Blackwell GPU: NVIDIA's mig-parted device filter 0x294110DE, lspci on a GB200 compute tray.
    "10de:2941": "GB200",
}
KIND_BY_VENDOR = {"1ae0": "gvnic", "15b3": "connectx", "1af4": "virtio", "1414": "mana"}
AMAZON_DEVICES = {
    **dict.fromkeys(("efa0", "efa1", "efa2", "efa3"), "efa"),
    **dict.fromkeys(("0ec2", "1ec2", "ec20", "ec21"), "ena"),
}
KIND_BY_DRIVER = {
    "gve": "gvnic",
    "mlx5_core": "connectx",
    "efa": "efa",
    "ena": "ena",
    "virtio_net": "virtio",
    "virtio-pci": "virtio",
    "mana": "mana",
}
MODULES = ("nvidia", "nvidia_peermem", "nvidia_uvm", "ib_core", "mlx5_core", "mlx5_ib", "ib_umad", "efa", "gve")
SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


class Sysfs:
    """Reads files below a root; every failure becomes None plus an ``unreadable`` entry.

    Paths are given as on the host ("/sys/class/net/eth0/mtu") and reported that way.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.unreadable: list[dict[str, str]] = []

    def local(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def record(self, path: str, reason: str) -> None:
        self.unreadable.append({"path": path, "reason": reason})

    def text(self, path: str, required: bool = True) -> str | None:
        """The file's content, stripped. A missing file is reported only when ``required``."""
        try:
            with open(self.local(path), encoding="utf-8", errors="replace") as handle:
                return handle.read().strip()
        except FileNotFoundError:
            if required:
                self.record(path, "missing")
        except OSError as exc:
            # Real sysfs answers EINVAL for some attributes, e.g. speed of a link that is down.
            self.record(path, exc.strerror or str(exc))
        return None

    def integer(
        self, path: str, required: bool = True, minimum: int | None = None, unknown: str | None = None
    ) -> int | None:
        """The file as an integer; ``unknown`` is a value that means "no value" and is not an error."""
        value = self.text(path, required)
        if value is None or value == unknown:
            return None
        number = int(value) if INTEGER.match(value) else None
        if number is None or (minimum is not None and number < minimum):
            self.record(path, f"invalid value {value!r}")
            return None
        return number

    def raw(self, path: str) -> bytes | None:
        """Bytes of an optional file (EFI variables are binary)."""
        try:
            with open(self.local(path), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.record(path, exc.strerror or str(exc))
            return None

    def listdir(self, path: str) -> list[str]:
        """Sorted entries; an absent directory is simply empty (no RDMA devices, no PCI bus)."""
        try:
            return sorted(os.listdir(self.local(path)))
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.record(path, exc.strerror or str(exc))
            return []

    def exists(self, path: str) -> bool:
        """True also for a dangling symlink: its presence is the fact (``physfn``)."""
        return os.path.lexists(self.local(path))

    def link_name(self, path: str) -> str | None:
        """Basename of a symlink's target (``driver`` -> "mlx5_core"), None when absent."""
        try:
            return os.path.basename(os.readlink(self.local(path))) or None
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.record(path, exc.strerror or str(exc))
            return None

    def resolve(self, path: str) -> str:
        return os.path.realpath(self.local(path))


def present(sysfs: Sysfs, path: str) -> bool:
    """A class entry (/sys/class/net/eth1) is still there and leads somewhere; reported if not."""
    if os.path.exists(sysfs.local(path)):
        return True
    sysfs.record(path, "dangling symlink" if sysfs.exists(path) else "vanished during the scan")
    return False


# ---------------------------------------------------------------------------
# PCI
# ---------------------------------------------------------------------------


def pci_address_of(resolved: str) -> str | None:
    """The PCI function a resolved sysfs path belongs to (the last PCI address in it)."""
    addresses = [part for part in resolved.split("/") if PCI_ADDRESS.match(part)]
    return addresses[-1] if addresses else None


def pcie_switch_of(resolved: str) -> str | None:
    """Upstream port of the PCIe switch a device sits behind, None when it hangs off a root port.

    Below the host bridge the path reads root port, switch upstream port, switch
    downstream port, device; with fewer components there is no switch.
    """
    parts = resolved.split("/")
    bridges = [index for index, part in enumerate(parts) if HOST_BRIDGE.match(part)]
    if not bridges:
        return None
    below: list[str] = []
    for part in parts[bridges[-1] + 1 :]:
        if not PCI_ADDRESS.match(part):
            break
        below.append(part)
    return below[1] if len(below) >= 4 else None


def pci_id(sysfs: Sysfs, address: str) -> tuple[str | None, str | None]:
    """(vendor, device) as four lowercase hex digits each ("0x10de" -> "10de")."""
    ids = []
    for name in ("vendor", "device"):
        path = f"/sys/bus/pci/devices/{address}/{name}"
        value = sysfs.text(path)
        if value is not None and not HEX_ID.match(value):
            sysfs.record(path, f"invalid value {value!r}")
            value = None
        ids.append(value[2:].lower() if value else None)
    return ids[0], ids[1]


def numa_node(sysfs: Sysfs, address: str) -> int | None:
    node = sysfs.integer(f"/sys/bus/pci/devices/{address}/numa_node", minimum=-1)
    return None if node is None or node < 0 else node  # -1: no NUMA information


def pci_location(sysfs: Sysfs, address: str) -> dict[str, Any]:
    """Facts every PCI-backed device shares: id, NUMA node, switch, driver."""
    base = f"/sys/bus/pci/devices/{address}"
    vendor, device = pci_id(sysfs, address)
    return {
        "pci_address": address,
        "pci_id": f"{vendor}:{device}" if vendor and device else None,
        "driver": sysfs.link_name(f"{base}/driver"),
        "numa_node": numa_node(sysfs, address),
        "pcie_switch": pcie_switch_of(sysfs.resolve(base)),
    }


def nic_kind(pci_id_: str | None, driver: str | None) -> str:
    vendor, _sep, device = (pci_id_ or ":").partition(":")
    if vendor in KIND_BY_VENDOR:
        return KIND_BY_VENDOR[vendor]
    if vendor == "1d0f" and device in AMAZON_DEVICES:
        return AMAZON_DEVICES[device]
    return KIND_BY_DRIVER.get(driver or "", "unknown")


def nvidia_device(sysfs: Sysfs, address: str) -> tuple[str, dict[str, Any]] | None:
    """("gpu", facts) or ("nvswitch", facts) for an NVIDIA function, else None."""
    base = f"/sys/bus/pci/devices/{address}"
    if sysfs.text(f"{base}/vendor") != f"0x{NVIDIA}":
        return None
    device_class = (sysfs.text(f"{base}/class") or "").lower()
    if device_class.startswith(NVSWITCH_CLASS):
        _vendor, device = pci_id(sysfs, address)
        return "nvswitch", {"pci_address": address, "pci_id": f"{NVIDIA}:{device}" if device else None}
    if not device_class.startswith(GPU_CLASSES):
        return None  # audio function of a graphics card, and the like
    location = pci_location(sysfs, address)
    return "gpu", {
        "pci_address": address,
        "pci_id": location["pci_id"],
        "model": GPU_MODELS.get(location["pci_id"] or "", "unknown"),
        "numa_node": location["numa_node"],
        "driver": location["driver"],
        "pcie_switch": location["pcie_switch"],
    }


# ---------------------------------------------------------------------------
# Network devices
# ---------------------------------------------------------------------------


def nic(sysfs: Sysfs, name: str) -> dict[str, Any] | None:
    """One hardware netdev; None for virtual ones (no ``device`` link: lo, bridges, veth)."""
    base = f"/sys/class/net/{name}"
    if not present(sysfs, base):
        return None
    if not sysfs.exists(f"{base}/device"):
        return None
    # virtio-net hangs below a virtio device inside the PCI function: the driver is
    # the netdev's parent's (virtio_net), the PCI facts are the function's.
    driver = sysfs.link_name(f"{base}/device/driver")
    address = pci_address_of(sysfs.resolve(f"{base}/device"))
    location: dict[str, Any] = {"pci_address": None, "pci_id": None, "numa_node": None, "pcie_switch": None}
    sriov: dict[str, Any] = {"sriov_totalvfs": None, "sriov_numvfs": None, "is_virtual_function": False}
    if address:
        location = pci_location(sysfs, address)
        pci = f"/sys/bus/pci/devices/{address}"
        sriov = {
            "sriov_totalvfs": sysfs.integer(f"{pci}/sriov_totalvfs", required=False, minimum=0),
            "sriov_numvfs": sysfs.integer(f"{pci}/sriov_numvfs", required=False, minimum=0),
            "is_virtual_function": sysfs.exists(f"{pci}/physfn"),
        }
    operstate = sysfs.text(f"{base}/operstate")
    return {
        "name": name,
        "pci_address": location["pci_address"],
        "pci_id": location["pci_id"],
        "driver": driver,
        "kind": nic_kind(location["pci_id"], driver),
        "mtu": sysfs.integer(f"{base}/mtu", minimum=1),
        "speed_mbps": link_speed(sysfs, base, operstate),
        "operstate": operstate.lower() if operstate else None,
        "numa_node": location["numa_node"],
        "pcie_switch": location["pcie_switch"],
        **sriov,
    }


def link_speed(sysfs: Sysfs, base: str, operstate: str | None) -> int | None:
    """Link speed in Mb/s, None when the kernel does not know it.

    A link that is not up has no speed (reading it fails with EINVAL), and the
    kernel writes -1 (SPEED_UNKNOWN) for drivers that do not report one, such
    as virtio: both are facts, not read errors.
    """
    if (operstate or "").lower() != "up":
        return None
    return sysfs.integer(f"{base}/speed", minimum=1, unknown="-1")


# ---------------------------------------------------------------------------
# RDMA devices
# ---------------------------------------------------------------------------


def _after_colon(value: str | None) -> str | None:
    """The name in a numbered state such as "4: ACTIVE"."""
    if value is None:
        return None
    return value.partition(":")[2].strip() or value.strip() or None


def rdma_port(sysfs: Sysfs, device: str, port: str) -> dict[str, Any]:
    base = f"/sys/class/infiniband/{device}/ports/{port}"
    rate = sysfs.text(f"{base}/rate")
    rate_gbit_s = None
    if rate is not None:
        match = RATE.match(rate)
        if match:
            rate_gbit_s = float(match.group(1))
        else:
            sysfs.record(f"{base}/rate", f"invalid value {rate!r}")
    gids = []
    for index in sorted((name for name in sysfs.listdir(f"{base}/gids") if name.isdigit()), key=int):
        gid = sysfs.text(f"{base}/gids/{index}")
        # The GID table has a fixed size; unused entries read as all zeros.
        if gid and gid.replace("0", "").replace(":", ""):
            gids.append(
                {
                    "index": int(index),
                    "gid": gid,
                    # RoCE only; InfiniBand GIDs have no type or netdev (those files read EINVAL there).
                    "type": _optional_text(sysfs, f"{base}/gid_attrs/types/{index}"),
                    "netdev": _optional_text(sysfs, f"{base}/gid_attrs/ndevs/{index}"),
                }
            )
    pkeys = []
    for index in sorted((name for name in sysfs.listdir(f"{base}/pkeys") if name.isdigit()), key=int):
        pkey = _hex(sysfs, f"{base}/pkeys/{index}")
        if pkey:
            pkeys.append(f"0x{pkey:04x}")
    return {
        "port": int(port),
        "state": _after_colon(sysfs.text(f"{base}/state")),
        "phys_state": _after_colon(sysfs.text(f"{base}/phys_state")),
        "rate": rate,
        "rate_gbit_s": rate_gbit_s,
        "link_layer": sysfs.text(f"{base}/link_layer"),
        "gid_count": len(gids),
        "gids": gids,
        # Assigned by the subnet manager: 0 on an InfiniBand port means no SM has configured it.
        "lid": _hex(sysfs, f"{base}/lid"),
        "sm_lid": _hex(sysfs, f"{base}/sm_lid"),
        "pkeys": pkeys,
    }


def _optional_text(sysfs: Sysfs, path: str) -> str | None:
    """A file that some ports do not have, or that reads EINVAL on them: None, not an unreadable entry."""
    try:
        with open(sysfs.local(path), encoding="utf-8") as handle:
            return handle.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _hex(sysfs: Sysfs, path: str) -> int | None:
    """A hexadecimal sysfs value such as a LID ("0x1a"); absent files give None, bad values are recorded."""
    value = _optional_text(sysfs, path)
    if value is None:
        return None
    try:
        return int(value, 16)
    except ValueError:
        sysfs.record(path, f"invalid value {value!r}")
        return None


def rdma_netdev(sysfs: Sysfs, device: str, ports: list[str]) -> str | None:
    """The netdev behind an RDMA device: GID 0's netdev (RoCE), else the PCI function's (IPoIB)."""
    base = f"/sys/class/infiniband/{device}"
    for port in ports:
        # Not reported when unreadable: an InfiniBand port's GID has no netdev and reads EINVAL.
        try:
            with open(sysfs.local(f"{base}/ports/{port}/gid_attrs/ndevs/0"), encoding="utf-8") as handle:
                name = handle.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if name:
            return name
    names = sysfs.listdir(f"{base}/device/net")
    return names[0] if names else None


def rdma_device(sysfs: Sysfs, name: str) -> dict[str, Any] | None:
    base = f"/sys/class/infiniband/{name}"
    if not present(sysfs, base):
        return None
    address = pci_address_of(sysfs.resolve(f"{base}/device"))
    location: dict[str, Any] = {"pci_address": None, "pci_id": None, "numa_node": None, "pcie_switch": None}
    if address:
        location = pci_location(sysfs, address)
    else:
        sysfs.record(f"{base}/device", "not a PCI device")
    driver = sysfs.link_name(f"{base}/device/driver")
    ports = sorted((port for port in sysfs.listdir(f"{base}/ports") if PORT.match(port)), key=int)
    return {
        "name": name,
        "pci_address": location["pci_address"],
        "pci_id": location["pci_id"],
        "driver": driver,
        "kind": nic_kind(location["pci_id"], driver),
        "netdev": rdma_netdev(sysfs, name, ports),
        "numa_node": location["numa_node"],
        "pcie_switch": location["pcie_switch"],
        "is_virtual_function": bool(address) and sysfs.exists(f"/sys/bus/pci/devices/{address}/physfn"),
        "nvswitch_bridge": False,  # gather() reads the VPD where it can matter
        "ports": [rdma_port(sysfs, name, port) for port in ports],
    }


def nvswitch_bridge(sysfs: Sysfs, address: str | None, pci_id_: str | None) -> bool | None:
    """Whether a ConnectX function is an NVLink-5 baseboard's NVSwitch bridge (VPD SMDL=SW_MNG), not a NIC.

    None where that cannot be told: a ConnectX function whose VPD is unreadable (reading it needs root; the
    reason is in ``unreadable``). Other devices, and ConnectX functions without VPD, are no bridges.
    """
    if not address or not (pci_id_ or "").startswith(f"{MELLANOX}:"):
        return False
    recorded = len(sysfs.unreadable)
    vpd = sysfs.raw(f"/sys/bus/pci/devices/{address}/vpd")
    if vpd is None:
        return None if len(sysfs.unreadable) > recorded else False
    return NVSWITCH_BRIDGE_VPD in vpd


# ---------------------------------------------------------------------------
# Host
# ---------------------------------------------------------------------------


def os_release(sysfs: Sysfs) -> dict[str, str | None]:
    text = sysfs.text("/etc/os-release", required=False)
    if text is None:
        text = sysfs.text("/usr/lib/os-release", required=False)  # the fallback os-release(5) names
    if text is None:
        sysfs.record("/etc/os-release", "missing")
        return {}
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep or key.strip().startswith("#"):
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            words = [value.strip()]
        values[key.strip()] = " ".join(words)
    return {"id": values.get("ID"), "version_id": values.get("VERSION_ID"), "pretty_name": values.get("PRETTY_NAME")}


def secure_boot(sysfs: Sysfs) -> bool | None:
    """The EFI variable holds 4 attribute bytes, then the value; absent on BIOS boot."""
    data = sysfs.raw(SECURE_BOOT_VAR)
    if data is None:
        return None
    if len(data) < 5:
        sysfs.record(SECURE_BOOT_VAR, f"too short ({len(data)} bytes)")
        return None
    return data[4] == 1


def loaded_modules(sysfs: Sysfs) -> dict[str, bool]:
    text = sysfs.text("/proc/modules") or ""
    loaded = {line.split()[0] for line in text.splitlines() if line.strip()}
    return {module: module in loaded for module in MODULES}


def nvidia_driver_version(sysfs: Sysfs) -> str | None:
    text = sysfs.text("/proc/driver/nvidia/version", required=False)
    if text is not None:
        match = NVIDIA_VERSION.search(text)
        if match:
            return match.group(1)
        sysfs.record("/proc/driver/nvidia/version", "no version after 'Kernel Module'")
    return sysfs.text("/sys/module/nvidia/version", required=False) or None


# AWS's EFA installer's record of its version and the packages it installed (aws_efa.MARKER_FILE).
EFA_INSTALLER_MARKER = "/opt/amazon/efa_installed_packages"
# The package database of Debian and Ubuntu; RPM's is binary (rpmdb.sqlite) and not read here.
DPKG_STATUS = "/var/lib/dpkg/status"
# The GPU and network stack's packages, by name prefix: what an image ships that gpufabric's host-stack roles adopt
# or install (driver and fabric manager, CUDA, NCCL, RDMA, DOCA/MLNX, UCX, MPI, EFA, libfabric, kernel headers).
STACK_PACKAGE_PREFIXES = (
    "nvidia-",
    "libnvidia-",
    "cuda-",
    "libnccl",
    "rdma-core",
    "ibverbs-",
    "libibverbs",
    "librdmacm",
    "rdmacm-utils",
    "ibacm",
    "libibumad",
    "libibmad",
    "libibnetdisc",
    "python3-pyverbs",
    "infiniband-diags",
    "perftest",
    "mlnx-",
    "doca-",
    "ucx",
    "libucx",
    "openmpi",
    "libopenmpi",
    "efa",
    "libfabric",
    "aws-ofi-nccl",
    "linux-headers-",
    "linux-modules-extra-",
)


def stack_packages(sysfs: Sysfs) -> dict[str, str] | None:
    """{package: version} of the installed stack packages (STACK_PACKAGE_PREFIXES) from dpkg's database; None on a
    host without one (an RPM host, or a simulated tree without var/lib/dpkg/status)."""
    text = sysfs.text(DPKG_STATUS, required=False)
    if text is None:
        return None
    packages: dict[str, str] = {}
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line[:1].isspace():
                fields[key] = value.strip()
        name, status, version = fields.get("Package", ""), fields.get("Status", "").split(), fields.get("Version")
        # "install ok installed", or "hold ok installed" when held: the third word is the package's state.
        if version and status[2:3] == ["installed"] and name.startswith(STACK_PACKAGE_PREFIXES):
            packages[name] = version
    return dict(sorted(packages.items()))


def host(sysfs: Sysfs, packages: bool = False) -> dict[str, Any]:
    return {
        "kernel": sysfs.text("/proc/sys/kernel/osrelease") or None,
        "os": os_release(sysfs),
        "secure_boot": secure_boot(sysfs),
        "modules": loaded_modules(sysfs),
        "nvidia_driver_version": nvidia_driver_version(sysfs),
        "mlx5_core_version": sysfs.text("/sys/module/mlx5_core/version", required=False) or None,
        # Read only when asked (`gpufabric plan --probe`): the facts are copied into every later task of a play.
        "packages": stack_packages(sysfs) if packages else None,
        # What AWS's EFA installer recorded (its version and packages), which the aws_efa role's adopt mode reads.
        "efa_installer": (sysfs.text(EFA_INSTALLER_MARKER, required=False) or "") if packages else None,
    }


# ---------------------------------------------------------------------------
# Putting it together
# ---------------------------------------------------------------------------


def affinity(gpus: list[dict[str, Any]], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GPU, the NICs and RDMA devices on its PCIe switch and on its NUMA node."""
    result = []
    for gpu in gpus:
        switch, node = gpu["pcie_switch"], gpu["numa_node"]
        same_switch = {d["name"] for d in devices if switch is not None and d["pcie_switch"] == switch}
        same_numa = {d["name"] for d in devices if node is not None and d["numa_node"] == node}
        result.append({"gpu": gpu["pci_address"], "same_switch": sorted(same_switch), "same_numa": sorted(same_numa)})
    return result


def default_routes(sysfs: Sysfs) -> list[str]:
    """Interfaces with an IPv4 default route (/proc/net/route: destination and mask 0, flag RTF_UP), lowest metric
    first. The management NIC carries it on every cloud (OCI's primary VNIC: Oracle's oci-hpc rdma-interface
    template takes the host's address on it from ansible_default_ipv4); the table is absent in a bare tree."""
    text = sysfs.text("/proc/net/route", required=False) or ""
    routes: list[tuple[int, str]] = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8 or fields[1] != "00000000" or fields[7] != "00000000":
            continue
        try:
            up, metric = int(fields[3], 16) & 0x1, int(fields[6])
        except ValueError:
            continue
        if up and fields[0] not in (name for _metric, name in routes):
            routes.append((metric, fields[0]))
    return [name for _metric, name in sorted(routes)]


def _each(sysfs: Sysfs, directory: str, read: Any) -> list[Any]:
    """``read`` for every entry of ``directory``; an entry that fails midway is reported and left out."""
    found = []
    for name in sysfs.listdir(directory):
        try:
            item = read(sysfs, name)
        except (OSError, ValueError) as exc:
            sysfs.record(f"{directory}/{name}", f"unreadable: {exc}")
            continue
        if item is not None:
            found.append(item)
    return found


def gather(root: str = "/", packages: bool = False) -> dict[str, Any]:
    """All hardware facts below ``root``; see the fabric_facts module's RETURN for the shape."""
    sysfs = Sysfs(root)
    nvidia = _each(sysfs, "/sys/bus/pci/devices", nvidia_device)
    gpus = sorted((facts for kind, facts in nvidia if kind == "gpu"), key=lambda gpu: gpu["pci_address"])
    nvswitches = sorted((facts for kind, facts in nvidia if kind == "nvswitch"), key=lambda sw: sw["pci_address"])
    nics = sorted(_each(sysfs, "/sys/class/net", nic), key=lambda item: item["name"])
    rdma_devices = sorted(_each(sysfs, "/sys/class/infiniband", rdma_device), key=lambda item: item["name"])
    if gpus and not nvswitches:
        # Only a GPU host without PCI NVSwitches can have NVSwitch bridges; VPD reads are slow, so only there.
        for device in rdma_devices:
            if not device["is_virtual_function"]:
                device["nvswitch_bridge"] = nvswitch_bridge(sysfs, device["pci_address"], device["pci_id"])
    return {
        "root": root,
        "gpus": gpus,
        # PCI NVSwitches (HGX A100/H100/H200); NVLink-5 baseboards show theirs as RDMA devices with nvswitch_bridge.
        "nvswitches": nvswitches,
        "nics": nics,
        "default_routes": default_routes(sysfs),
        "rdma_devices": rdma_devices,
        "affinity": affinity(gpus, nics + rdma_devices),
        "host": host(sysfs, packages),
        "unreadable": sysfs.unreadable,
    }
