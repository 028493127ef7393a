# SPDX-License-Identifier: Apache-2.0
"""Compare a host's hardware facts (hw_facts.gather) with its catalog profile.

Each finding is {"severity", "check", "subject", "message"}: severity
``error`` means the fabric cannot reach the profile's bandwidth as it stands
(a GPU or NIC missing, a link down or slow); ``warning`` means something the
roles are expected to fix or that may be legitimate (a kernel module not
loaded yet, a GPU without a NIC on its PCIe switch); ``info`` means a
sysfs entry that could not be read. Messages name the device, so an
operator knows where to look.

Also infers the best-matching bare-metal profile for a host that has none.
"""

from __future__ import annotations

from typing import Any

# Kernel modules a fabric needs on the host, in the order an operator would check them.
REQUIRED_MODULES = {
    "tcpx": ("nvidia", "gve"),
    "tcpxo": ("nvidia", "gve"),
    "gpudirect_rdma": ("nvidia", "gve", "ib_core", "mlx5_ib"),
    "infiniband": ("nvidia", "ib_core", "mlx5_ib", "nvidia_peermem"),
    "roce": ("nvidia", "ib_core", "mlx5_ib", "nvidia_peermem"),
    "efa": ("nvidia", "ib_core", "efa"),
    "none": ("nvidia",),
}
# What NVLSM needs on an NVLink-5 baseboard (HGX B200), whatever the fabric: fabric manager's prelaunch script finds
# the bridges with mlx5_ib and NVLSM opens their /dev/infiniband/umad* (Fabric Manager User Guide, NVLSM section).
NVLSM_MODULES = ("mlx5_ib", "ib_umad")
# Management NIC kinds found by identity: gvnic and ena by PCI id and driver (hw_facts), vnic (OCI's primary VNIC,
# on bare metal a front-end ConnectX port on the rails' driver) as the interface of the default route
# (``default_route_nics``). The others are found by no identity here.
MANAGEMENT_KINDS = ("gvnic", "ena", "vnic", "accelnet")
# Management NICs found as the interface of the default route: OCI's primary VNIC, and Azure's synthetic VMBus NIC
# (accelerated networking enslaves a Mellanox VF to it, which carries no address: NCCL must use the synthetic one).
DEFAULT_ROUTE_KINDS = ("vnic", "accelnet")


def _finding(severity: str, check: str, subject: str, message: str) -> dict[str, str]:
    return {"severity": severity, "check": check, "subject": subject, "message": message}


def _gbit(value: float) -> str:
    return f"{value:g} Gb/s"


# ---------------------------------------------------------------------------
# Which devices are the GPU network
# ---------------------------------------------------------------------------


def _port_link_layer(device: dict[str, Any]) -> str | None:
    ports = device.get("ports") or []
    return ports[0].get("link_layer") if ports else None


def _port_rate(device: dict[str, Any]) -> float | None:
    ports = device.get("ports") or []
    return ports[0].get("rate_gbit_s") if ports else None


def rail_candidates(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The ConnectX RDMA devices that could be GPU-network rails: the profile's link layer, no NVSwitch bridge.

    Where the profile carves VFs from its NICs (sriov), the NICs are the physical functions; the VFs are for
    pods and VMs. (GCP passes VFs through as the GPU NICs themselves: those count.)
    """
    layer = "InfiniBand" if profile["nics"]["gpu"]["kind"] == "connectx_ib" else "Ethernet"
    carved = "sriov" in profile
    return [
        dev
        for dev in facts.get("rdma_devices", [])
        if dev.get("kind") == "connectx"
        and _port_link_layer(dev) == layer
        and not dev.get("nvswitch_bridge")  # an NVLink-5 baseboard's NVSwitch bridge is InfiniBand too
        and not (carved and dev.get("is_virtual_function"))
    ]


def choose_rails(candidates: list[dict[str, Any]], facts: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The rails among ``candidates`` for a profile that does not name its RDMA devices.

    Names say nothing on bare metal: a DGX-style HGX H100 has its compute HCAs at mlx5_0,3,4,5,6,9,10,11 with
    storage and BlueField ports between them (Oracle lists exactly those for BM.GPU.H200.8 and BM.GPU.B200.8,
    oci-hpc playbooks/roles/nccl-conf/templates). So the rails are chosen by what the hardware shows, link layer
    (``rail_candidates``), then GPU affinity (on a GPU's PCIe switch), then rate (the profile's or more). A
    narrowing applies only where it leaves the profile's count, so a rail that is down or trained slow stays a
    rail, and is reported as such, rather than vanishing from the count.
    """
    gpu_switches = {gpu["pcie_switch"] for gpu in facts.get("gpus", []) if gpu.get("pcie_switch")}
    narrowings = (
        lambda dev: dev.get("pcie_switch") in gpu_switches,
        lambda dev: (_port_rate(dev) or 0) >= spec["speed_gbit_s"],
    )
    selected = candidates
    for keep in narrowings:
        narrowed = [dev for dev in selected if keep(dev)]
        if len(narrowed) >= spec["count"]:
            selected = narrowed
    return selected


def _pci_order(item: dict[str, Any]) -> tuple[int, str, str]:
    """Order on the bus: by PCI address (a device without one last), then by name."""
    address = item.get("pci_address")
    return (0 if address else 1, address or "", item.get("name") or "")


def _gpu_switches(facts: dict[str, Any]) -> set[str]:
    return {gpu["pcie_switch"] for gpu in facts.get("gpus", []) if gpu.get("pcie_switch")}


def default_route_nics(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The netdevs (``nics`` entries) that carry an IPv4 default route, lowest metric first.

    The one place the idea "the management NIC carries the default route" lives: a management NIC of a kind in
    DEFAULT_ROUTE_KINDS is found so, and the roce role never configures these interfaces whatever the profile's
    management kind.

    A default route on a virtual interface (a bond or VLAN over the NIC, which hw_facts does not list) comes back as
    ``{"name": ...}`` alone: the name is what NCCL_SOCKET_IFNAME and the exclusion need.
    """
    by_name = {nic["name"]: nic for nic in facts.get("nics", [])}
    return [by_name.get(name, {"name": name}) for name in facts.get("default_routes") or []]


def management_nics(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The host's management NICs (``nics`` entries), by identity, in PCI order; [] where the kind says nothing.

    A management NIC is a netdev of the management kind (``gvnic`` or ``ena``, as hw_facts tells them by PCI id and
    driver) that is not on a GPU's PCIe switch, where that leaves the profile's count; else the first of that kind on
    the bus. On GCP the control gVNIC is the first gVNIC on the bus (Google's images name it enp0s12 on A3 High and
    Mega, enp0s19 on A3 Ultra and A4; COS names it eth0), the GPU gVNICs sit beside the GPUs.

    OCI's primary VNIC (kind ``vnic``) has no PCI identity of its own: on bare metal it is a front-end ConnectX port
    on the same driver as the rails (mlx5_2 and mlx5_11 beside BM.GPU.H100.8's rails), which Oracle's images name
    eth0 and others by PCI path. Azure's management NIC (kind ``accelnet``) is the synthetic VMBus NIC, which has no
    PCI identity either; accelerated networking enslaves a Mellanox VF to it that carries no address. Both are the
    interface of the default route (``default_route_nics``).
    """
    spec = profile["nics"]["management"]
    kind = spec["kind"]
    if kind not in MANAGEMENT_KINDS:
        return []
    count = spec.get("count", 1)
    if kind in DEFAULT_ROUTE_KINDS:
        return default_route_nics(facts)[:count]
    candidates = sorted((nic for nic in facts.get("nics", []) if nic.get("kind") == kind), key=_pci_order)
    switches = _gpu_switches(facts)
    away = [nic for nic in candidates if nic.get("pcie_switch") not in switches]
    return (away if len(away) >= count else candidates)[:count]


def gpu_network(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The devices that make up the profile's GPU network, as found on the host, in PCI order.

    Each item: {"name", "netdev" (a nics entry or None), "rdma" (an rdma_devices entry or None)}.
    gVNIC fabrics are netdevs, the gVNICs that are not the management NICs (``management_nics``), those on a GPU's
    PCIe switch where that leaves the profile's count; never by name, which each image gives its own way.
    ConnectX and EFA fabrics are RDMA devices (EFA has no netdev). ConnectX rails are the profile's
    ``rdma_devices`` where it names them, else ``choose_rails``.
    """
    spec = profile["nics"]["gpu"]
    kind = spec["kind"]
    netdevs = {nic["name"]: nic for nic in facts.get("nics", [])}
    if kind in ("gvnic", "ethernet"):
        wanted = "gvnic" if kind == "gvnic" else None
        management = {nic["name"] for nic in management_nics(facts, profile)}
        candidates = [
            nic
            for nic in facts.get("nics", [])
            if nic["name"] not in management and (wanted is None or nic.get("kind") == wanted)
        ]
        switches = _gpu_switches(facts)
        near = [nic for nic in candidates if nic.get("pcie_switch") in switches]
        if len(near) >= spec["count"]:
            candidates = near
        return [{"name": nic["name"], "netdev": nic, "rdma": None} for nic in sorted(candidates, key=_pci_order)]
    if kind == "efa":
        selected = [dev for dev in facts.get("rdma_devices", []) if dev.get("kind") == "efa"]
    else:
        candidates = rail_candidates(facts, profile)
        names = spec.get("rdma_devices")
        if names:
            by_name = {dev["name"]: dev for dev in candidates}
            selected = [by_name[name] for name in names if name in by_name]
        else:
            selected = choose_rails(candidates, facts, spec)
    return [{"name": dev["name"], "netdev": netdevs.get(dev.get("netdev") or ""), "rdma": dev} for dev in selected]


def nvswitch_bridges(facts: dict[str, Any]) -> list[str]:
    """RDMA devices that are an NVLink-5 baseboard's NVSwitch bridges (hw_facts.nvswitch_bridge)."""
    return [dev["name"] for dev in facts.get("rdma_devices", []) if dev.get("nvswitch_bridge")]


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------


def _check_gpus(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, str]]:
    expected = profile["gpu"]
    gpus = facts.get("gpus", [])
    out = []
    if len(gpus) < expected["count"]:
        out.append(
            _finding(
                "error",
                "gpu_count",
                "gpus",
                f"found {len(gpus)} of {expected['count']} GPUs ({expected['model']})",
            )
        )
    want_id = expected.get("pci_id")
    for gpu in gpus:
        if want_id and gpu.get("pci_id") and gpu["pci_id"] != want_id:
            out.append(
                _finding(
                    "error",
                    "gpu_model",
                    gpu["pci_address"],
                    f"GPU {gpu['pci_address']} is {gpu['pci_id']} ({gpu.get('model')}); "
                    f"the profile expects {want_id} ({expected['model']})",
                )
            )
    # HGX A100/H100/H200 show PCI NVSwitches; NVLink-5 baseboards (HGX B200) show NVSwitch bridge functions instead.
    if expected["nvswitch"] and not facts.get("nvswitches") and not nvswitch_bridges(facts):
        unread = [dev["name"] for dev in facts.get("rdma_devices", []) if dev.get("nvswitch_bridge") is None]
        message = (
            "no NVSwitch found: neither PCI NVSwitches (HGX A100/H100/H200) nor NVSwitch bridge functions "
            "(ConnectX-7 with VPD SMDL=SW_MNG, HGX B200); the profile has NVSwitch"
        )
        if unread:
            message += f" (the VPD of {', '.join(unread)} could not be read: run fabric_facts as root)"
        out.append(_finding("error", "nvswitch", "nvswitches", message))
    return out


def _check_nics(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, str]]:
    spec = profile["nics"]["gpu"]
    found = gpu_network(facts, profile)
    out = []
    if len(found) < spec["count"]:
        # Only RDMA device names are the profile's; interface names are the image's (found: those the host has).
        expected_names = spec.get("rdma_devices") or []
        seen = {item["name"] for item in found} | {item["netdev"]["name"] for item in found if item["netdev"]}
        missing = [name for name in expected_names if name not in seen]
        if missing:
            detail = f"; missing: {', '.join(missing)}"
        else:
            detail = f"; found: {', '.join(item['name'] for item in found)}" if found else ""
        out.append(
            _finding(
                "error",
                "nic_count",
                "gpu_network",
                f"found {len(found)} of {spec['count']} GPU-network NICs ({spec['kind']}){detail}",
            )
        )
    for item in found:
        out += _check_link(item, spec)
    return out


def _check_link(item: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, str]]:
    """Link state and rate: from the RDMA port where there is one (it is what NCCL uses), else the netdev."""
    out = []
    netdev, rdma = item["netdev"], item["rdma"]
    want_gbit = spec["speed_gbit_s"]
    if rdma is not None:
        for port in rdma.get("ports", []):
            where = f"{rdma['name']} port {port['port']}"
            # Trained but never configured: an InfiniBand port at INIT with LID 0 was reached by no subnet manager.
            unmanaged = port.get("link_layer") == "InfiniBand" and port.get("phys_state") == "LinkUp"
            if port.get("state") != "ACTIVE" and unmanaged and not port.get("lid"):
                message = (
                    f"no subnet manager has configured {where} (LID 0, {port.get('state')}): "
                    "start opensm/UFM on the fabric or check the switch"
                )
                out.append(_finding("error", "subnet_manager", rdma["name"], message))
            elif port.get("state") != "ACTIVE":
                message = f"{where} is {port.get('state')} ({port.get('phys_state')}); expected ACTIVE"
                out.append(_finding("error", "link_down", rdma["name"], message))
            elif port.get("rate_gbit_s") is not None and port["rate_gbit_s"] < want_gbit:
                message = f"{where} runs at {_gbit(port['rate_gbit_s'])}; the profile expects {_gbit(want_gbit)}"
                out.append(_finding("error", "link_rate", rdma["name"], message))
    elif netdev is not None:
        name = netdev["name"]
        if netdev.get("operstate") not in (None, "up"):
            message = f"GPU-network NIC {name} is {netdev['operstate']} (operstate)"
            out.append(_finding("error", "link_down", name, message))
        elif netdev.get("speed_mbps") is not None and netdev["speed_mbps"] < want_gbit * 1000:
            message = f"{name} links at {_gbit(netdev['speed_mbps'] / 1000)}; the profile expects {_gbit(want_gbit)}"
            out.append(_finding("error", "link_rate", name, message))
    if netdev is not None and spec.get("mtu") and netdev.get("mtu") is not None and netdev["mtu"] < spec["mtu"]:
        message = f"{netdev['name']} MTU {netdev['mtu']} is below the profile's {spec['mtu']}"
        out.append(_finding("error", "mtu", netdev["name"], message))
    return out


def _check_rails(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, str]]:
    """Info: which RDMA devices of the right link layer were not taken as rails, and why (bare metal)."""
    spec = profile["nics"]["gpu"]
    if spec["kind"] not in ("connectx_ib", "connectx_roce"):
        return []
    rails = {item["name"] for item in gpu_network(facts, profile)}
    gpu_switches = {gpu["pcie_switch"] for gpu in facts.get("gpus", []) if gpu.get("pcie_switch")}
    out = []
    for dev in rail_candidates(facts, profile):
        if dev["name"] in rails:
            continue
        if spec.get("rdma_devices"):
            why = "not in the profile's nics.gpu.rdma_devices"
        elif dev.get("pcie_switch") not in gpu_switches:
            why = "no GPU on its PCIe switch"
        else:
            why = f"below the profile's {_gbit(spec['speed_gbit_s'])}"
        message = f"{dev['name']} is not counted as a GPU-network rail ({why}): a storage or front-end port"
        out.append(_finding("info", "rails", dev["name"], message))
    return out


def _check_affinity(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, str]]:
    network = set()
    for item in gpu_network(facts, profile):
        network.add(item["name"])
        if item["netdev"]:
            network.add(item["netdev"]["name"])
    if not network:
        return []  # nic_count already says so
    out = []
    for entry in facts.get("affinity", []):
        if not network.intersection(entry.get("same_switch", [])):
            local = sorted(network.intersection(entry.get("same_numa", [])))
            fallback = f"; NUMA-local: {', '.join(local)}" if local else "; none on its NUMA node either"
            out.append(
                _finding(
                    "warning",
                    "gpu_nic_affinity",
                    entry["gpu"],
                    f"GPU {entry['gpu']} has no GPU-network NIC on its PCIe switch{fallback}",
                )
            )
    return out


def _check_modules(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, str]]:
    loaded = facts.get("host", {}).get("modules", {})
    needs = {module: f"{profile['fabric']} needs it" for module in REQUIRED_MODULES[profile["fabric"]]}
    bridges = nvswitch_bridges(facts)
    if bridges:
        # Fabric manager starts NVLSM on NVLink-5 baseboards; NVLSM talks to the NVSwitches through the bridges'
        # umad devices, or CUDA fails with error 802 (siderolabs/extensions #893; spectrocloud/CanvOS #700).
        for module in NVLSM_MODULES:
            needs.setdefault(
                module, f"fabric manager's NVLSM reaches the NVSwitches through {', '.join(bridges)} with it"
            )
    return [
        _finding("warning", "module", module, f"kernel module {module} is not loaded ({why})")
        for module, why in needs.items()
        if not loaded.get(module)
    ]


def findings(facts: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, str]]:
    """Every way the host differs from its profile; an empty list means it matches."""
    out = _check_gpus(facts, profile) + _check_nics(facts, profile)
    out += _check_affinity(facts, profile) + _check_modules(facts, profile) + _check_rails(facts, profile)
    out += [
        _finding("info", "unreadable", entry["path"], f"could not read {entry['path']}: {entry['reason']}")
        for entry in facts.get("unreadable", [])
    ]
    return out


# ---------------------------------------------------------------------------
# Inference for hosts without a profile
# ---------------------------------------------------------------------------


def _fabric_summary(facts: dict[str, Any]) -> str:
    gpus = facts.get("gpus", [])
    ids = sorted({gpu.get("pci_id") or "?" for gpu in gpus})
    rdma = facts.get("rdma_devices", [])
    layers = sorted({_port_link_layer(dev) or "?" for dev in rdma})
    return f"{len(gpus)} GPUs ({', '.join(ids) or 'none'}), {len(rdma)} RDMA devices ({', '.join(layers) or 'none'})"


def infer_profile(facts: dict[str, Any], catalog: Any, cloud: str = "baremetal") -> tuple[str | None, str]:
    """The catalog profile of ``cloud`` whose hardware the facts match, with the reason.

    A candidate must match GPU count and id (or model family) and have its
    whole GPU network present; among those, fewer findings wins.
    """
    matches = []
    for name in catalog.names():
        profile = catalog.get(name)
        # VFs for pods are a site's choice, not something the hardware shows: never inferred.
        if profile["cloud"] != cloud or "sriov" in profile:
            continue
        gpus = facts.get("gpus", [])
        want_id = profile["gpu"].get("pci_id")
        if len(gpus) != profile["gpu"]["count"]:
            continue
        if want_id and any(gpu.get("pci_id") != want_id for gpu in gpus):
            continue
        if len(gpu_network(facts, profile)) < profile["nics"]["gpu"]["count"]:
            continue
        errors = [f for f in findings(facts, profile) if f["severity"] == "error"]
        matches.append((len(errors), name, profile))
    if not matches:
        return None, f"no {cloud} profile matches this hardware: {_fabric_summary(facts)}"
    error_count, name, profile = min(matches, key=lambda match: (match[0], match[1]))
    spec = profile["nics"]["gpu"]
    reason = (
        f"inferred from hardware: {profile['gpu']['count']}x {profile['gpu']['model']} and "
        f"{spec['count']}x {spec['kind']} at {_gbit(spec['speed_gbit_s'])}"
    )
    if error_count:
        reason += f" (closest match, with {error_count} error {'finding' if error_count == 1 else 'findings'})"
    return name, reason
