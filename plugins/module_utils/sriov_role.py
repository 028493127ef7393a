# SPDX-License-Identifier: Apache-2.0
"""The sriov role's plan, on the controller: the profile's VF layout held against the role's variables and the
host's hardware, every bad input named (``errors``), and the boot unit's configuration.

Not in module_utils/sriov.py: that file is copied to hosts as a standalone boot script and imports no other
module_utils; this plan uses it (``layout_vars``, the one check `gpufabric plan` shares) and sriov_firmware.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import sriov, sriov_firmware
from ansible_collections.gpufabric.cluster.plugins.module_utils.host_plan import no_profile

PCI_FULL = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
PCI_SHORT = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
VF_KEYS = ("index", "mac", "guid", "node_guid", "port_guid", "trust", "spoofchk", "vlan")
FIRMWARE_LINK_TYPES = ("auto", "IB", "ETH", "keep")
NIC_KINDS = ("connectx_ib", "connectx_roce")
EXAMPLE_PROFILE = "baremetal/hgx-h100-ib-ndr-sriov"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def normalize_pci(value: str) -> str:
    """0c:00.0 -> 0000:0c:00.0 (lowercase); anything else unchanged."""
    lowered = value.strip().lower()
    if PCI_SHORT.match(lowered):
        return f"0000:{lowered}"
    return lowered if PCI_FULL.match(lowered) else value


class Hardware:
    """Physical and virtual functions of the host as fabric_facts reported them, looked up by any name."""

    def __init__(self, facts: dict[str, Any]) -> None:
        self.by_pci: dict[str, dict[str, Any]] = {}
        self.names: dict[str, str] = {}
        for nic in facts.get("nics") or []:
            address = nic.get("pci_address")
            if not address:
                continue
            entry = self.by_pci.setdefault(
                address,
                {
                    "pci_address": address,
                    "pci_id": nic.get("pci_id"),
                    "kind": nic.get("kind"),
                    "netdev": nic.get("name"),
                    "rdma_device": None,
                    "totalvfs": nic.get("sriov_totalvfs"),
                    "numvfs": nic.get("sriov_numvfs"),
                    "is_vf": bool(nic.get("is_virtual_function")),
                },
            )
            self.names.setdefault(nic.get("name"), address)
            entry["netdev"] = entry["netdev"] or nic.get("name")
        for device in facts.get("rdma_devices") or []:
            address = device.get("pci_address")
            if address and address in self.by_pci:
                self.by_pci[address]["rdma_device"] = self.by_pci[address]["rdma_device"] or device.get("name")
                self.names.setdefault(device.get("name"), address)

    def find(self, name: str) -> dict[str, Any] | None:
        address = normalize_pci(name)
        if address in self.by_pci:
            return self.by_pci[address]
        if name in self.names:
            return self.by_pci[self.names[name]]
        return None

    def physical_functions(self, pci_ids: list[str]) -> list[dict[str, Any]]:
        """ConnectX physical functions (no VFs) whose vendor:device is in ``pci_ids`` (any ConnectX when empty)."""
        return sorted(
            (
                entry
                for entry in self.by_pci.values()
                if entry["kind"] == "connectx" and not entry["is_vf"] and (not pci_ids or entry["pci_id"] in pci_ids)
            ),
            key=lambda entry: entry["pci_address"],
        )

    def capable(self) -> list[str]:
        return [
            f"{entry['pci_address']} ({entry['netdev']})"
            for entry in sorted(self.by_pci.values(), key=lambda entry: entry["pci_address"])
            if not entry["is_vf"] and entry["totalvfs"]
        ]


def _check_settings(settings: dict[str, Any], link_type: str, errors: list[str]) -> None:
    if settings.get("verify") and settings.get("bake"):
        errors.append(
            "sriov's verify entry point (tasks_from: verify) reads the live host and cannot run with "
            "sriov_bake: true; accepted: one of them"
        )
    ethernet_only = {"trust": settings.get("trust"), "spoofchk": settings.get("spoofchk")}
    for name, value in ethernet_only.items():
        if value is not None and not isinstance(value, bool):
            errors.append(f"sriov_{name} {value!r} is not a boolean; accepted: true, false or null (leave as is)")
        elif value is not None and link_type == "infiniband":
            errors.append(
                f"sriov_{name} {value!r} applies to Ethernet VFs only and the profile's NICs are InfiniBand; "
                "accepted: null"
            )
    vlan = settings.get("vlan")
    if vlan is not None and (not _is_int(vlan) or not 0 <= vlan <= 4095):
        errors.append(f"sriov_vlan {vlan!r} is not a VLAN id; accepted: an integer 0..4095 (0: none) or null")
    elif vlan is not None and link_type == "infiniband":
        errors.append(
            f"sriov_vlan {vlan!r} applies to Ethernet VFs only and the profile's NICs are InfiniBand; accepted: null"
        )
    if not isinstance(settings.get("rebind", True), bool):
        errors.append(f"sriov_rebind {settings.get('rebind')!r} is not a boolean; accepted: true or false")
    timeout = settings.get("timeout", 30)
    if not _is_int(timeout) or timeout < 1:
        errors.append(f"sriov_timeout {timeout!r} is not a number of seconds; accepted: an integer >= 1")
    link = settings.get("firmware_link_type", "auto")
    if link not in FIRMWARE_LINK_TYPES:
        errors.append(
            f"sriov_firmware_link_type {link!r} is not a link type; accepted: {', '.join(FIRMWARE_LINK_TYPES)}"
        )
    if settings.get("firmware") and not str(settings.get("mstconfig") or "").strip():
        errors.append(
            "sriov_mstconfig is empty; accepted: the mstconfig command (mstflint), a name or an absolute path"
        )
    path = str(settings.get("config_path") or "")
    if not path.startswith("/") or path.endswith("/"):
        errors.append(
            f"sriov_config_path {path!r} is not an absolute file path; accepted: e.g. /etc/gpufabric/sriov.json"
        )


def _vf_lists(settings: dict[str, Any], errors: list[str]) -> dict[str, list[dict[str, Any]]]:
    vfs = settings.get("vfs") or {}
    if not isinstance(vfs, dict):
        errors.append(f"sriov_vfs {vfs!r} is not a mapping; accepted: physical function -> list of VF settings")
        return {}
    for key, entries in vfs.items():
        if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
            errors.append(f"sriov_vfs[{key!r}] is not a list of VF settings; accepted: [{{index: 0, guid: ...}}, ...]")
            continue
        for entry in entries:
            unknown = sorted(set(entry) - set(VF_KEYS))
            if unknown:
                errors.append(
                    f"sriov_vfs[{key!r}] has unknown key(s) {', '.join(unknown)}; accepted: {', '.join(VF_KEYS)}"
                )
            if "index" not in entry:
                errors.append(f"sriov_vfs[{key!r}] entry {entry!r} has no index; accepted: index 0..num_vfs-1")
    return vfs


class PhysicalFunction(TypedDict, total=False):
    pf: str  # the PCI address (a bake: the name given, normalized when it is a PCI address)
    pci_address: str | None
    netdev: str | None
    rdma_device: str | None
    totalvfs: int | None
    numvfs: int | None
    vfs: list[dict[str, Any]]  # sriov_vfs entries of this physical function


class SriovPlan(TypedDict, total=False):
    profile: str
    link_type: str | None  # infiniband or ethernet; None when the profile is refused
    num_vfs: int  # VFs per physical function
    pci_ids: list[str]  # vendor:device of the profile's GPU NICs
    pfs: list[PhysicalFunction]
    select: dict[str, Any] | None  # a bake without names: select the PFs by pci_id at boot
    config: dict[str, Any] | None  # what the sriov_vfs module applies now
    boot_config: dict[str, Any]  # the file the boot unit reads (absent when the profile is refused)
    boot_summary: list[str]
    boot_pf_count: int  # PFs the boot unit waits for (its start timeout)
    firmware: dict[str, Any]  # the firmware settings wanted (sriov_firmware.desired)
    summary: list[str]  # one line per physical function, for the report
    errors: list[str]
    warnings: list[str]


def plan(settings: dict[str, Any], host_plan: dict[str, Any], facts: dict[str, Any]) -> SriovPlan:
    """The role's whole plan; ``errors`` lists every bad input, nothing is raised for them.

    ``settings``: the role's variables without the ``sriov_`` prefix (and ``verify``, the entry point);
    ``host_plan``: gpufabric_plan; ``facts``: ansible_facts, of which a live run reads ``gpufabric_hardware``
    (fabric_facts) and a bake reads nothing.
    """
    errors: list[str] = []
    hardware = facts.get("gpufabric_hardware") or {}
    profile = host_plan.get("profile")
    result: SriovPlan = {
        "profile": profile,
        "link_type": None,
        "num_vfs": 0,
        "pci_ids": [],
        "pfs": [],
        "select": None,
        "config": None,
        "firmware": {},
        "summary": [],
        "errors": errors,
        "warnings": [],
    }
    if host_plan.get("profile") in (None, "unknown"):
        # The plan says why (which gpufabric_profile, or which cloud instance type, the catalog lacks).
        errors.append(f"{no_profile(host_plan)}; accepted: a profile of `gpufabric catalog list`")
        return result
    layout = host_plan.get("sriov")
    gpu = (host_plan.get("nics") or {}).get("gpu") or {}
    if not layout:
        errors.append(
            f"profile {profile!r} declares no virtual functions (no sriov: section, or its best tier does not "
            f"run the sriov role); accepted: a profile with sriov: {{vfs_per_nic: N}} such as {EXAMPLE_PROFILE}"
        )
        return result
    if gpu.get("kind") not in NIC_KINDS:
        errors.append(
            f"profile {profile!r} has GPU NICs of kind {gpu.get('kind')!r}; accepted: {', '.join(NIC_KINDS)} "
            "(ConnectX physical functions)"
        )
        return result
    link_type = layout["link_type"]
    result["link_type"] = link_type
    result["pci_ids"] = list(gpu.get("pci_ids") or [])
    # The layout variables go through the one check `gpufabric plan` and `k8s manifests` run too.
    chosen, layout_errors = sriov.layout_vars({key: settings.get(key) for key in sriov.LAYOUT_VARS})
    errors.extend(layout_errors)
    _check_settings(settings, link_type, errors)
    num_vfs = result["num_vfs"] = layout["vfs_per_nic"] if chosen["num_vfs"] is None else chosen["num_vfs"]
    vf_lists = _vf_lists(settings, errors)
    requested = chosen["physical_functions"]
    shared = {
        "num_vfs": num_vfs,
        "address_scheme": chosen["address_scheme"],
        "trust": settings.get("trust"),
        "spoofchk": settings.get("spoofchk"),
        "vlan": settings.get("vlan"),
        "rebind": settings.get("rebind", True),
        "timeout": settings.get("timeout", 30),
    }

    pfs: list[dict[str, Any]] = []
    if settings.get("bake"):
        if requested:
            for name in requested:
                pci = normalize_pci(name)
                if not PCI_FULL.match(pci) and re.match(r"^mlx5_\d+$", name):
                    errors.append(
                        f"sriov_physical_functions entry {name!r} is an RDMA device name, which a bake cannot map to "
                        "a PCI function; accepted in a bake: PCI addresses or netdev names"
                    )
                pfs.append(
                    {
                        "pf": pci,
                        "pci_address": pci if PCI_FULL.match(pci) else None,
                        "netdev": None,
                        "rdma_device": None,
                        "totalvfs": None,
                        "numvfs": None,
                        "aliases": [name, pci],
                    }
                )
        elif not result["pci_ids"]:
            errors.append(
                f"sriov_physical_functions is empty and profile {profile!r} names no nics.gpu.pci_ids, so a bake "
                "cannot select the physical functions at boot; accepted: PCI addresses or netdev names"
            )
    else:
        found = Hardware(hardware)
        source = "sriov_physical_functions"
        names = requested
        if not names and layout.get("physical_functions"):
            names, source = list(layout["physical_functions"]), f"profile {profile} (nics.gpu)"
        if names:
            for name in names:
                entry = found.find(name)
                if entry is None:
                    errors.append(
                        f"{source} names {name!r}, which is neither a network device, an RDMA device nor a PCI "
                        f"function of this host (read under {settings.get('hw_root', '/')}); SR-IOV capable physical "
                        f"functions here: {', '.join(found.capable()) or 'none'}"
                    )
                elif entry["is_vf"]:
                    errors.append(
                        f"{source} names {name!r} ({entry['pci_address']}), which is a virtual function; accepted: "
                        f"physical functions such as {', '.join(found.capable()) or 'none found'}"
                    )
                else:
                    pfs.append({**entry, "pf": entry["pci_address"], "aliases": [name]})
        else:
            for entry in found.physical_functions(result["pci_ids"]):
                pfs.append({**entry, "pf": entry["pci_address"], "aliases": []})
            if not pfs:
                errors.append(
                    f"no ConnectX physical function with pci_id in {result['pci_ids'] or 'any'} was found under "
                    f"{settings.get('hw_root', '/')} for profile {profile!r}; accepted: set sriov_physical_functions"
                )
        seen: dict[str, str] = {}
        for pf in pfs:
            pf.pop("is_vf", None)
            pf.pop("pci_id", None)
            pf.pop("kind", None)
            given = pf["aliases"][0] if pf["aliases"] else pf["pf"]
            if pf["pf"] in seen:
                errors.append(f"sriov_physical_functions names {pf['pf']} twice ({seen[pf['pf']]}, {given})")
            seen[pf["pf"]] = given

    # sriov_vfs keys name a physical function by any of its names.
    claimed: set[str] = set()
    for pf in pfs:
        names = {pf["pf"], *(pf.get("aliases") or []), pf.get("netdev"), pf.get("rdma_device")} - {None}
        keys = [key for key in vf_lists if key in names or normalize_pci(key) in names]
        if len(keys) > 1:
            errors.append(f"sriov_vfs gives VFs for {pf['pf']} under several names: {', '.join(keys)}; accepted: one")
        pf["vfs"] = list(vf_lists[keys[0]]) if keys else []
        claimed.update(keys)
        pf.pop("aliases", None)
    for key in vf_lists:
        if key not in claimed:
            errors.append(
                f"sriov_vfs names {key!r}, which is not one of the physical functions configured "
                f"({', '.join(pf['pf'] for pf in pfs) or 'none: a bake selects them at boot'}); accepted: those"
            )

    entries = [{"pf": pf["pf"], **shared, "vfs": pf["vfs"]} for pf in pfs]
    sysfs_root = settings.get("hw_root") or "/"
    by_pci_id = {"pci_ids": result["pci_ids"], "settings": {**shared, "vfs": []}}
    select = by_pci_id if settings.get("bake") and not requested else None
    result["pfs"] = pfs
    result["select"] = select
    result["config"] = {"sysfs_root": sysfs_root, "physical_functions": entries, "select": select}
    # The file the boot unit reads. Where the PFs were found the way a bake's boot unit finds them (by the
    # profile's PCI ids: neither the operator nor the profile names them) and no PF has a VF list of its own, a
    # live host writes what a bake writes: a host booted from a baked image then carries the very file a live
    # run would write (no drift), and a renumbered PCI bus changes nothing.
    result["boot_config"] = result["config"]
    if not requested and not layout.get("physical_functions") and not any(pf["vfs"] for pf in pfs):
        result["boot_config"] = {"sysfs_root": sysfs_root, "physical_functions": [], "select": by_pci_id}

    firmware_vfs = settings.get("firmware_num_vfs")
    if firmware_vfs is not None and (not _is_int(firmware_vfs) or firmware_vfs < max(num_vfs, 1)):
        errors.append(
            f"sriov_firmware_num_vfs {firmware_vfs!r} is not a firmware VF count for {num_vfs} VFs; accepted: an "
            f"integer >= {max(num_vfs, 1)}, or null for the VF count"
        )
        firmware_vfs = None
    link = settings.get("firmware_link_type", "auto")
    link = ("IB" if link_type == "infiniband" else "ETH") if link == "auto" else link
    result["firmware"] = sriov_firmware.desired(num_vfs, firmware_vfs, link)

    scheme = shared["address_scheme"]
    addresses = {
        "derived": "addresses derived from the PF",
        "explicit": "addresses from sriov_vfs",
        "kernel": "kernel addresses",
    }
    for pf in pfs:
        name = pf.get("netdev") or pf.get("rdma_device")
        result["summary"].append(
            f"{pf['pf']}{f' ({name})' if name else ''}: {num_vfs} VFs, {addresses.get(scheme, scheme)}"
        )
    at_boot = (
        f"at boot, every physical function with pci_id in {', '.join(by_pci_id['pci_ids'])}: {num_vfs} VFs, "
        f"{addresses.get(scheme, scheme)}"
    )
    if select:
        result["summary"].append(at_boot)
    # What the boot unit's file says it does and how many PFs it waits for (its start timeout): the same live
    # and in a bake when the file is the same, so a select counts the profile's GPU NICs, not those found now.
    selects = bool(result["boot_config"]["select"])
    result["boot_summary"] = [at_boot] if selects else list(result["summary"])
    result["boot_pf_count"] = len(result["boot_config"]["physical_functions"]) + (gpu.get("count") or 1) * selects
    return result
