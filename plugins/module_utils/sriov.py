# SPDX-License-Identifier: Apache-2.0
"""SR-IOV virtual functions of a physical function: read the state, validate a request, apply it.

The one implementation behind the ``sriov_vfs`` module and the boot script
``gpufabric-sriov-apply`` (the role ``sriov`` copies this file to hosts as
``/usr/local/lib/gpufabric/sriov.py``), so it uses the standard library only,
imports no other module_utils and runs on the target's system Python.

Kernel rules it follows (as sriov-network-operator does, pkg/host/internal/sriov):
the VF count changes only through 0 (a nonzero count written over another one
fails with EBUSY), never above ``sriov_totalvfs`` (ERANGE), and nothing is
written when the count already matches. Per-VF settings go through the PF with
``ip link set dev PF vf N ...``; on InfiniBand new GUIDs take effect when the VF
driver is unbound and bound again.

Every request is validated completely before the first write: a bad value
raises ``SriovError`` with one sentence naming the value, where it came from and
what is accepted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from typing import Any

PCI_DEVICES = "/sys/bus/pci/devices"
PCI_DRIVERS = "/sys/bus/pci/drivers"
PCI_ADDRESS = re.compile(r"^(?:([0-9a-f]{4}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
NETDEV = re.compile(r"^[^/\s:]{1,15}$")
PCI_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{4}$")
MAC = re.compile(r"^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$")
GUID_OCTETS = re.compile(r"^[0-9a-f]{2}(?::[0-9a-f]{2}){7}$")
GUID_SYSFS = re.compile(r"^[0-9a-f]{4}(?::[0-9a-f]{4}){3}$")
SCHEMES = ("derived", "explicit", "kernel")
ZERO_GUID = "00:00:00:00:00:00:00:00"
ZERO_MAC = "00:00:00:00:00:00"
ARPHRD_INFINIBAND = "32"
POLL_SECONDS = 0.05
DEFAULT_TIMEOUT = 30
# Per-PF settings (the module's options and a config entry's keys, less "pf"): type check and default.
SETTINGS: dict[str, tuple[str, Any]] = {
    "num_vfs": ("int", None),
    "address_scheme": ("str", "derived"),
    "vfs": ("list", []),
    "trust": ("bool?", None),
    "spoofchk": ("bool?", None),
    "vlan": ("int?", None),
    "rebind": ("bool", True),
    "timeout": ("int", DEFAULT_TIMEOUT),
}
VF_KEYS = ("index", "mac", "guid", "node_guid", "port_guid", "trust", "spoofchk", "vlan")
VF_SETTINGS = ("mac", "node_guid", "port_guid", "trust", "spoofchk", "vlan")


class SriovError(Exception):
    """A request that cannot be applied; the message is one sentence for the operator."""


class Host:
    """The machine: files below ``root`` (paths given as on the host) and commands through ``runner``."""

    def __init__(self, root: str = "/", runner: Callable[[list[str]], tuple[int, str, str]] | None = None) -> None:
        self.root = root
        self.runner = runner
        self.ip_command = "ip"

    def local(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path: str) -> str:
        with open(self.local(path), encoding="utf-8") as handle:
            return handle.read().strip()

    def write(self, path: str, value: str) -> None:
        """One write(2), as sysfs wants; OSError (EBUSY, ERANGE, ...) propagates."""
        fd = os.open(self.local(path), os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def exists(self, path: str) -> bool:
        return os.path.lexists(self.local(path))

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self.local(path)))
        except OSError:
            return []

    def readlink(self, path: str) -> str:
        return os.readlink(self.local(path))

    def realpath(self, path: str) -> str:
        """The resolved path, as a host path again ("/sys/devices/...")."""
        root = os.path.realpath(self.root)
        resolved = os.path.relpath(os.path.realpath(self.local(path)), root)
        return "/" + ("" if resolved == "." else resolved)

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        if self.runner:
            return self.runner(argv)
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


# ---------------------------------------------------------------------------
# Addresses
# ---------------------------------------------------------------------------


def normalize_guid(value: str) -> str | None:
    """Normalize "b8ce:f603:00a1:b2c4" or "B8:CE:..." -> "b8:ce:f6:03:00:a1:b2:c4"; None when not a GUID."""
    text = value.strip().lower()
    if GUID_SYSFS.match(text):
        digits = text.replace(":", "")
        return ":".join(digits[i : i + 2] for i in range(0, 16, 2))
    return text if GUID_OCTETS.match(text) else None


def derived_mac(pf_mac: str, index: int) -> str:
    """VF ``index``'s MAC: 02 (locally administered), the PF MAC's octets 2..5 (from 0), the index."""
    return ":".join(["02", *pf_mac.split(":")[2:6], f"{index:02x}"])


def derived_guid(pf_guid: str, index: int) -> str:
    """VF ``index``'s node and port GUID: 02, the 40 bits after the PF GUID's OUI, then index + 1."""
    number = index + 1
    return ":".join(["02", *pf_guid.split(":")[3:8], f"{number >> 8:02x}", f"{number & 0xFF:02x}"])


def _pci_address(value: str) -> str | None:
    match = PCI_ADDRESS.match(value.strip().lower())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{domain or '0000'}:{bus}:{device}.{function}"


def _vf_address(pf_address: str, offset: int, stride: int, index: int) -> str:
    """The PCI address of VF ``index`` from the PF's routing id, ``sriov_offset`` and ``sriov_stride``."""
    domain, bus, rest = pf_address.split(":")
    device, function = rest.split(".")
    rid = (int(bus, 16) << 8 | int(device, 16) << 3 | int(function)) + offset + index * stride
    return f"{domain}:{rid >> 8 & 0xFF:02x}:{rid >> 3 & 0x1F:02x}.{rid & 7}"


# ---------------------------------------------------------------------------
# The physical function
# ---------------------------------------------------------------------------


def _int(host: Host, path: str, default: int | None = None) -> int | None:
    try:
        return int(host.read(path), 0)
    except (OSError, ValueError):
        return default


def _link_name(host: Host, path: str) -> str | None:
    try:
        return os.path.basename(host.readlink(path))
    except OSError:
        return None


def capable_pfs(host: Host) -> list[str]:
    """Physical functions with sriov_totalvfs > 0, as "0000:0c:00.0 (ibp12s0)"."""
    found = []
    for address in host.listdir(PCI_DEVICES):
        base = f"{PCI_DEVICES}/{address}"
        if not host.exists(f"{base}/physfn") and (_int(host, f"{base}/sriov_totalvfs") or 0) > 0:
            names = host.listdir(f"{base}/net")
            found.append(f"{address} ({names[0]})" if names else address)
    return found


def select_pfs(host: Host, pci_ids: list[str]) -> list[str]:
    """Sorted PCI addresses of physical functions with sriov_totalvfs whose vendor:device is in ``pci_ids``."""
    wanted = {pci_id.lower() for pci_id in pci_ids}
    found = []
    for address in host.listdir(PCI_DEVICES):
        base = f"{PCI_DEVICES}/{address}"
        if host.exists(f"{base}/physfn") or not host.exists(f"{base}/sriov_totalvfs"):
            continue
        try:
            pci_id = f"{host.read(f'{base}/vendor')[2:]}:{host.read(f'{base}/device')[2:]}".lower()
        except OSError:
            continue
        if pci_id in wanted:
            found.append(address)
    return sorted(found)


def resolve_pf(host: Host, pf: str, source: str) -> dict[str, Any]:
    """The physical function named by netdev or PCI address; ``source`` names where ``pf`` came from."""
    address = _pci_address(pf)
    if address is None and NETDEV.match(pf) and host.exists(f"/sys/class/net/{pf}/device"):
        address = os.path.basename(host.realpath(f"/sys/class/net/{pf}/device"))
    base = f"{PCI_DEVICES}/{address}"
    if address is None or not host.exists(base):
        capable = ", ".join(capable_pfs(host)) or "none"
        raise SriovError(
            f"{source} {pf!r} is neither a network interface nor a PCI device on this host; "
            f"give the netdev name or PCI address of a physical function (SR-IOV capable here: {capable})."
        )
    if host.exists(f"{base}/physfn"):
        parent = os.path.basename(host.realpath(f"{base}/physfn"))
        raise SriovError(f"{source} {pf!r} ({address}) is a virtual function; give its physical function {parent}.")
    total = _int(host, f"{base}/sriov_totalvfs")
    if not total:
        state = "reads 0" if total == 0 else "is absent"
        raise SriovError(
            f"{source} {pf!r} ({address}) is not SR-IOV capable (sriov_totalvfs {state}); on ConnectX enable "
            "SRIOV_EN and NUM_OF_VFS in firmware with mstconfig (role option sriov_firmware) and reboot."
        )
    netdevs = host.listdir(f"{base}/net")
    netdev = netdevs[0] if netdevs else None
    rdma = host.listdir(f"{base}/infiniband")
    ipoib = bool(netdev) and _read(host, f"/sys/class/net/{netdev}/type") == ARPHRD_INFINIBAND
    ib_port = bool(rdma) and _read(host, f"{base}/infiniband/{rdma[0]}/ports/1/link_layer") == "InfiniBand"
    link_type = "infiniband" if ipoib or ib_port else "ethernet"
    pf_mac = _read(host, f"/sys/class/net/{netdev}/address") if netdev and link_type == "ethernet" else None
    pf_guid = None
    if link_type == "infiniband" and rdma:
        pf_guid = normalize_guid(_read(host, f"{base}/infiniband/{rdma[0]}/node_guid") or "")
    virtfns = host.listdir(base)
    first_vf = f"{base}/virtfn0" if "virtfn0" in virtfns else None
    vf_driver = (_link_name(host, f"{first_vf}/driver") if first_vf else None) or _link_name(host, f"{base}/driver")
    return {
        "pci_address": address,
        "netdev": netdev,
        "link_type": link_type,
        "totalvfs": total,
        "numvfs": _int(host, f"{base}/sriov_numvfs", 0),
        "pf_mac": pf_mac.lower() if pf_mac else None,
        "pf_guid": pf_guid,
        "vf_driver": vf_driver,
    }


def _read(host: Host, path: str) -> str | None:
    try:
        return host.read(path)
    except OSError:
        return None


# ---------------------------------------------------------------------------
# Validation (no host access)
# ---------------------------------------------------------------------------


def _check_type(value: Any, kind: str, where: str) -> Any:
    optional = kind.endswith("?")
    kind = kind.rstrip("?")
    if value is None and optional:
        return None
    python = {"int": int, "bool": bool, "str": str, "list": list, "dict": dict}[kind]
    if not isinstance(value, python) or (kind == "int" and isinstance(value, bool)):
        accepted = {"int": "an integer", "bool": "true or false", "str": "a string", "list": "a list"}
        accepted_text = accepted.get(kind, "a mapping")
        raise SriovError(f"{where} {value!r} has the wrong type; give {accepted_text}{' or null' if optional else ''}.")
    return value


def normalize_settings(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """Type-checked per-PF settings with defaults; ``where`` prefixes key names in errors ("option ")."""
    unknown = sorted(set(raw) - set(SETTINGS))
    if unknown:
        raise SriovError(f"{where}{unknown[0]} is not a known key; use {', '.join(SETTINGS)}.")
    settings: dict[str, Any] = {}
    for key, (kind, default) in SETTINGS.items():
        value = raw.get(key, default)
        if value is None and default is None and not kind.endswith("?"):
            raise SriovError(f"{where}{key} is missing; it is required.")
        settings[key] = _check_type(value, kind, f"{where}{key}")
    if settings["num_vfs"] < 0:
        raise SriovError(f"{where}num_vfs {settings['num_vfs']} is negative; give 0 (no VFs) or more.")
    if settings["address_scheme"] not in SCHEMES:
        raise SriovError(f"{where}address_scheme {settings['address_scheme']!r} is unknown; use {', '.join(SCHEMES)}.")
    if settings["timeout"] < 1:
        raise SriovError(f"{where}timeout {settings['timeout']} is too small; give seconds >= 1.")
    if settings["vlan"] is not None and not 0 <= settings["vlan"] <= 4095:
        raise SriovError(f"{where}vlan {settings['vlan']} is out of range; give 0..4095 (0 = untagged).")
    settings["vfs"] = _normalize_vfs(settings["vfs"], where)
    return settings


def _normalize_vfs(vfs: list[Any], where: str) -> list[dict[str, Any]]:
    result, seen = [], set()
    for position, raw in enumerate(vfs):
        at = f"{where}vfs[{position}]"
        _check_type(raw, "dict", at)
        unknown = sorted(set(raw) - set(VF_KEYS))
        if unknown:
            raise SriovError(f"{at}.{unknown[0]} is not a known key; use {', '.join(VF_KEYS)}.")
        index = _check_type(raw.get("index"), "int", f"{at}.index")
        if index < 0 or index in seen:
            raise SriovError(f"{at}.index {index} is {'negative' if index < 0 else 'given twice'}; give each VF once.")
        seen.add(index)
        vf: dict[str, Any] = {"index": index}
        for key in ("trust", "spoofchk"):
            vf[key] = _check_type(raw.get(key), "bool?", f"{at}.{key}")
        vf["vlan"] = _check_type(raw.get("vlan"), "int?", f"{at}.vlan")
        if vf["vlan"] is not None and not 0 <= vf["vlan"] <= 4095:
            raise SriovError(f"{at}.vlan {vf['vlan']} is out of range; give 0..4095 (0 = untagged).")
        mac = _check_type(raw.get("mac"), "str?", f"{at}.mac")
        if mac is not None:
            mac = mac.strip().lower()
            if not MAC.match(mac) or mac == ZERO_MAC or int(mac[:2], 16) & 1:
                raise SriovError(
                    f"{at}.mac {raw['mac']!r} is not a unicast MAC address; give six hex octets such as "
                    "02:00:00:00:00:01 (not all zero, first octet even)."
                )
        vf["mac"] = mac
        if raw.get("guid") is not None and (raw.get("node_guid") is not None or raw.get("port_guid") is not None):
            raise SriovError(f"{at}.guid is given with node_guid or port_guid; give guid (both) or those two.")
        for key, value in (("node_guid", raw.get("node_guid")), ("port_guid", raw.get("port_guid"))):
            value = raw["guid"] if raw.get("guid") is not None else value
            name = "guid" if raw.get("guid") is not None else key
            _check_type(value, "str?", f"{at}.{name}")
            guid = normalize_guid(value) if value is not None else None
            if value is not None and (guid is None or guid == ZERO_GUID):
                raise SriovError(
                    f"{at}.{name} {value!r} is not a GUID; give 8 hex octets such as 02:00:00:00:00:00:00:01 "
                    "or the sysfs form 0200:0000:0000:0001 (not all zero)."
                )
            vf[key] = guid
        result.append(vf)
    return sorted(result, key=lambda vf: vf["index"])


def desired_vfs(settings: dict[str, Any], pf: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """Per VF index: the settings to enforce (None = leave as is), checked against the physical function."""
    label = f"{pf['pci_address']}" + (f" ({pf['netdev']})" if pf["netdev"] else "")
    count, scheme, infiniband = settings["num_vfs"], settings["address_scheme"], pf["link_type"] == "infiniband"
    if count > pf["totalvfs"]:
        raise SriovError(
            f"{where}num_vfs {count} is above sriov_totalvfs {pf['totalvfs']} of {label}; give 0..{pf['totalvfs']} "
            "(or raise NUM_OF_VFS in firmware with mstconfig, then reboot)."
        )
    given = {vf["index"]: vf for vf in settings["vfs"]}
    for position, vf in enumerate(settings["vfs"]):
        at = f"{where}vfs[{position}]"
        if vf["index"] >= count:
            raise SriovError(f"{at}.index {vf['index']} does not exist with num_vfs {count}; give 0..{count - 1}.")
        for key in ("mac",) if infiniband else ("node_guid", "port_guid"):
            if vf[key] is not None:
                kind = "MAC addresses" if infiniband else "GUIDs"
                raise SriovError(f"{at}.{key} is set but {label} is {pf['link_type']}, which takes no {kind}.")
        if scheme == "kernel" and any(vf[key] is not None for key in ("mac", "node_guid", "port_guid")):
            raise SriovError(f"{at} gives an address but address_scheme is kernel; use explicit or derived.")
    for key in ("trust", "spoofchk", "vlan"):
        if infiniband and (settings[key] is not None or any(vf[key] is not None for vf in settings["vfs"])):
            raise SriovError(f"{where}{key} is set but {label} is InfiniBand; {key} applies to Ethernet VFs only.")
    if scheme == "derived" and not infiniband and pf["pf_mac"] is None:
        raise SriovError(f"{label} has no MAC address to derive VF MACs from; use address_scheme explicit or kernel.")
    if scheme == "derived" and infiniband and pf["pf_guid"] is None:
        raise SriovError(f"{label} has no node_guid to derive VF GUIDs from; use address_scheme explicit or kernel.")
    if scheme == "derived" and not infiniband and count > 256:
        raise SriovError(f"{where}num_vfs {count} exceeds the 256 VFs the derived MAC scheme numbers; use explicit.")
    result = []
    for index in range(count):
        vf = given.get(index, {})
        entry: dict[str, Any] = {"index": index}
        for key in VF_SETTINGS:
            entry[key] = vf.get(key) if vf.get(key) is not None else settings.get(key)
        if scheme == "derived":
            if infiniband:
                guid = derived_guid(pf["pf_guid"], index)
                entry["node_guid"] = entry["node_guid"] or guid
                entry["port_guid"] = entry["port_guid"] or guid
            else:
                entry["mac"] = entry["mac"] or derived_mac(pf["pf_mac"], index)
        if scheme == "explicit":
            missing = entry["mac"] is None if not infiniband else None in (entry["node_guid"], entry["port_guid"])
            if missing:
                wanted = "guid (or node_guid and port_guid)" if infiniband else "mac"
                raise SriovError(
                    f"{where}vfs has no {wanted} for VF {index} of {label}; address_scheme explicit needs one per VF."
                )
        result.append(entry)
    duplicates = duplicate_addresses({label: result})
    if duplicates:
        raise SriovError(f"{where}vfs repeat an address: {duplicates[0]}; every VF needs its own.")
    return result


def duplicate_addresses(vf_lists: list[list[dict[str, Any]]] | dict[str, list[dict[str, Any]]]) -> list[str]:
    """Addresses (mac, node_guid, port_guid) that two VFs share, one line each; all-zero (unset) ignored.

    ``vf_lists``: per PF, its VFs (dicts with ``index`` and the address keys), as a list (PFs named #0, #1, ...)
    or a dict keyed by PF name.
    """
    named = vf_lists.items() if isinstance(vf_lists, dict) else ((f"#{n}", vfs) for n, vfs in enumerate(vf_lists))
    owners: dict[tuple[str, str], list[str]] = {}
    for pf_name, vfs in named:
        for vf in vfs:
            for key in ("mac", "node_guid", "port_guid"):
                value = vf.get(key)
                if value and value not in (ZERO_MAC, ZERO_GUID):
                    owners.setdefault((key, value), []).append(f"{pf_name} VF {vf.get('index')}")
    return [f"{key} {value} on {', '.join(who)}" for (key, value), who in sorted(owners.items()) if len(who) > 1]


# The inventory variables that shape the VF layout. The role (filter sriov_plan), `gpufabric plan` and
# `gpufabric k8s manifests` (plugin_utils/fabric_plan.py) all check them here, so none of them accepts
# what another refuses.
LAYOUT_VARS = ("physical_functions", "num_vfs", "address_scheme")


def layout_vars(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """sriov_physical_functions, sriov_num_vfs and sriov_address_scheme checked: (normalized, errors).

    ``values`` holds them without the ``sriov_`` prefix; absent or null means the default. Normalized:
    ``physical_functions`` a list of names (a string is ONE physical function, never its characters),
    ``num_vfs`` an integer >= 0 or None (the profile's vfs_per_nic), ``address_scheme`` one of SCHEMES.
    Each error is one sentence naming the variable, its value and what is accepted.
    """
    errors: list[str] = []
    given = values.get("physical_functions")
    names = [] if given is None or given == "" else [given] if isinstance(given, str) else given
    if not isinstance(names, list) or not all(isinstance(name, str) and name.strip() for name in names):
        errors.append(
            f"sriov_physical_functions {given!r} is not a list of names; accepted: a list of netdev names, RDMA "
            "device names or PCI addresses, or one such name"
        )
        names = []
    count = values.get("num_vfs")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
        errors.append(
            f"sriov_num_vfs {count!r} is not a VF count; accepted: an integer >= 0, or null for the profile's "
            "vfs_per_nic"
        )
        count = None
    scheme = values.get("address_scheme")
    scheme = "derived" if scheme is None else scheme
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        errors.append(f"sriov_address_scheme {scheme!r} is not a scheme; accepted: {', '.join(SCHEMES)}")
        scheme = "derived"
    return {"physical_functions": list(names), "num_vfs": count, "address_scheme": scheme}, errors


# ---------------------------------------------------------------------------
# State
# ---------------------------------------------------------------------------


def _ip_vfinfo(host: Host, netdev: str) -> dict[int, dict[str, Any]]:
    """``ip -j -d link show dev PF`` -> vfinfo_list entries by VF number.

    JSON keys as iproute2 prints them (ip/ipaddress.c, print_linkinfo: "vfinfo_list"; print_vfinfo:
    "vf", "address" (the admin MAC), "vlan_list" [{"vlan", "qos"}] or a plain "vlan", "spoofchk" and
    "trust" (booleans), "node guid" and "port guid" (InfiniBand, added in iproute2 5.5)).
    """
    argv = [host.ip_command, "-j", "-d", "link", "show", "dev", netdev]
    rc, out, err = host.run(argv)
    if rc != 0:
        raise SriovError(f"{' '.join(argv)} failed (rc {rc}): {err.strip() or out.strip()}.")
    try:
        links = json.loads(out)
        return {int(vf["vf"]): vf for vf in links[0].get("vfinfo_list", [])}
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise SriovError(f"{' '.join(argv)} printed output that is not iproute2 JSON ({error}).") from error


def _vlan(vfinfo: dict[str, Any]) -> int | None:
    if "vlan_list" in vfinfo:
        vlans = vfinfo["vlan_list"] or [{}]
        return int(vlans[0].get("vlan", 0))
    return int(vfinfo.get("vlan", 0)) if "address" in vfinfo else None


def read_state(host: Host, pf: dict[str, Any]) -> dict[str, Any]:
    """{num_vfs, vfs: [{index, pci_address, driver, mac | node_guid + port_guid, trust, spoofchk, vlan}]}."""
    base = f"{PCI_DEVICES}/{pf['pci_address']}"
    count = _int(host, f"{base}/sriov_numvfs", 0) or 0
    links = sorted(int(name[6:]) for name in host.listdir(base) if re.match(r"^virtfn\d+$", name))
    vfinfo = _ip_vfinfo(host, pf["netdev"]) if links and pf["netdev"] else {}
    vfs = []
    for index in links:
        info = vfinfo.get(index, {})
        vf: dict[str, Any] = {
            "index": index,
            "pci_address": os.path.basename(host.realpath(f"{base}/virtfn{index}")),
            "driver": _link_name(host, f"{base}/virtfn{index}/driver"),
        }
        if pf["link_type"] == "infiniband":
            vf["node_guid"] = normalize_guid(info["node guid"]) if info.get("node guid") else None
            vf["port_guid"] = normalize_guid(info["port guid"]) if info.get("port guid") else None
        else:
            vf["mac"] = info.get("address", "").lower() or None
        vf.update(trust=info.get("trust"), spoofchk=info.get("spoofchk"), vlan=_vlan(info))
        vfs.append(vf)
    return {"num_vfs": count, "vfs": vfs}


def state_text(pf: dict[str, Any], state: dict[str, Any]) -> str:
    """YAML-like text of one PF's state, for a diff."""
    lines = [f"pf: {pf['pci_address']}", f"netdev: {pf['netdev']}", f"num_vfs: {state['num_vfs']}"]
    lines.append("vfs:" if state["vfs"] else "vfs: []")
    for vf in state["vfs"]:
        for number, (key, value) in enumerate(vf.items()):
            shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
            lines.append(f"{'  - ' if number == 0 else '    '}{key}: {shown}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Applying
# ---------------------------------------------------------------------------


def prepare(host: Host, pf: str, settings: dict[str, Any], where: str) -> dict[str, Any]:
    """Resolve and validate one PF request and read its state; raises SriovError, writes nothing."""
    info = resolve_pf(host, pf, f"{where}pf")
    desired = desired_vfs(settings, info, where)
    needs_ip = any(vf[key] is not None for vf in desired for key in VF_SETTINGS)
    if needs_ip and not info["netdev"]:
        raise SriovError(
            f"{info['pci_address']} has no network interface, so ip cannot set its VFs' addresses or settings; "
            "load its driver (InfiniBand: ib_ipoib) or use address_scheme kernel without per-VF settings."
        )
    return {"pf": info, "settings": settings, "desired": desired, "before": read_state(host, info)}


def _wait(host: Host, done: Callable[[], bool], timeout: float, failure: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            raise SriovError(failure())
        host.sleep(POLL_SECONDS)


def _virtfns(host: Host, address: str) -> int:
    return sum(1 for name in host.listdir(f"{PCI_DEVICES}/{address}") if re.match(r"^virtfn\d+$", name))


def _write(host: Host, path: str, value: str, label: str) -> None:
    try:
        host.write(path, value)
    except OSError as error:
        raise SriovError(f"{label}: writing {value} to {path} failed: {error.strerror or error}.") from error


def set_numvfs(host: Host, address: str, count: int, timeout: float) -> None:
    """Write ``count`` to sriov_numvfs through 0 and wait for the kernel to create or remove the VFs."""
    path = f"{PCI_DEVICES}/{address}/sriov_numvfs"
    current = _int(host, path, 0)
    if current == count:
        return
    for step in ([0] if current else []) + ([count] if count else []):
        _write(host, path, str(step), address)
        _wait(
            host,
            lambda step=step: _virtfns(host, address) == step,
            timeout,
            lambda step=step: (
                f"{address}: the kernel did not bring sriov_numvfs to {step} within {timeout} s "
                f"({_virtfns(host, address)} virtfn links); see dmesg."
            ),
        )


def _shown(value: Any) -> str:
    """A value as ip takes it: booleans as on/off."""
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _ip_set(host: Host, pf: dict[str, Any], index: int, key: str, value: Any) -> None:
    argv = [host.ip_command, "link", "set", "dev", pf["netdev"], "vf", str(index), key, _shown(value)]
    rc, out, err = host.run(argv)
    if rc != 0:
        raise SriovError(f"{pf['pci_address']}: {' '.join(argv)} failed (rc {rc}): {err.strip() or out.strip()}.")


def _rebind(host: Host, pf: dict[str, Any], vf: dict[str, Any], timeout: float) -> None:
    address, driver = vf["pci_address"], vf["driver"] or pf["vf_driver"]
    link = f"{PCI_DEVICES}/{address}/driver"
    if vf["driver"]:
        _write(host, f"{PCI_DRIVERS}/{vf['driver']}/unbind", address, pf["pci_address"])
        _wait(host, lambda: not host.exists(link), timeout, lambda: f"{address} did not unbind from {vf['driver']}.")
    _write(host, f"{PCI_DRIVERS}/{driver}/bind", address, pf["pci_address"])
    _wait(host, lambda: host.exists(link), timeout, lambda: f"{address} did not bind to {driver} within {timeout} s.")


def _changes(desired: dict[str, Any], current: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    current = current or {}
    return [
        (key, desired[key], current.get(key))
        for key in VF_SETTINGS
        if desired[key] is not None and current.get(key) != desired[key]
    ]


def execute(host: Host, plan: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """Apply a prepared plan (or, in check mode, predict it): {changed, actions, before, after}."""
    pf, settings, desired = plan["pf"], plan["settings"], plan["desired"]
    address, count, before = pf["pci_address"], settings["num_vfs"], plan["before"]
    actions, state = [], before
    if before["num_vfs"] != count:
        steps = [before["num_vfs"]] + ([0] if before["num_vfs"] and count else []) + [count]
        actions.append(f"{address}: sriov_numvfs {' -> '.join(map(str, steps))}")
        if check_mode:
            offset = _int(host, f"{PCI_DEVICES}/{address}/sriov_offset")
            stride = _int(host, f"{PCI_DEVICES}/{address}/sriov_stride")
            known = offset is not None and stride is not None
            address_keys = ("node_guid", "port_guid") if pf["link_type"] == "infiniband" else ("mac",)
            vfs = [
                {
                    "index": n,
                    "pci_address": _vf_address(address, offset or 0, stride or 0, n) if known else None,
                    "driver": pf["vf_driver"],
                    **dict.fromkeys((*address_keys, "trust", "spoofchk", "vlan")),
                }
                for n in range(count)
            ]
            state = {"num_vfs": count, "vfs": vfs}
        else:
            set_numvfs(host, address, count, settings["timeout"])
            state = read_state(host, pf)
    current = {vf["index"]: vf for vf in state["vfs"]}
    rebinds = []
    for want in desired:
        vf = current.get(want["index"], {})
        changes = _changes(want, vf)
        for key, new, old in changes:
            was = f" (was {_shown(old)})" if old is not None else ""
            actions.append(f"{address}: vf {want['index']} {key} {_shown(new)}{was}")
            if not check_mode:
                _ip_set(host, pf, want["index"], key, new)
            vf = {**vf, key: new}
        current[want["index"]] = vf
        guid_changed = any(change[0] in ("node_guid", "port_guid") for change in changes)
        if settings["rebind"] and guid_changed and vf.get("pci_address"):
            actions.append(f"{address}: vf {want['index']} rebind {vf['pci_address']} so the new GUIDs take effect")
            rebinds.append(vf)
    if not check_mode:
        for vf in rebinds:
            _rebind(host, pf, vf, settings["timeout"])
    if check_mode:
        after = {"num_vfs": count, "vfs": [current[n] for n in sorted(current)]}
    else:
        after = read_state(host, pf) if actions else before
    return {"changed": bool(actions), "actions": actions, "before": before, "after": after}


def apply_pf(host: Host, pf: str, settings: dict[str, Any], check_mode: bool, where: str = "option ") -> dict[str, Any]:
    """Validate and apply one PF's settings (raw dict; checked here). Returns pf plus execute()'s result."""
    plan = prepare(host, pf, normalize_settings(settings, where), where)
    return {"pf": plan["pf"], **execute(host, plan, check_mode)}


# ---------------------------------------------------------------------------
# Config file (the role writes it; the boot script applies it)
# ---------------------------------------------------------------------------


def load_config(text: str, source: str) -> dict[str, Any]:
    """Parse and validate /etc/gpufabric/sriov.json; ``source`` (its path) starts every error."""
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise SriovError(f"{source} is not valid JSON ({error}); the role sriov writes it.") from error
    _check_type(raw, "dict", f"{source}:")
    unknown = sorted(set(raw) - {"sysfs_root", "physical_functions", "select"})
    if unknown:
        raise SriovError(f"{source}: {unknown[0]} is not a known key; use sysfs_root, physical_functions, select.")
    config: dict[str, Any] = {"sysfs_root": _check_type(raw.get("sysfs_root", "/"), "str", f"{source}: sysfs_root")}
    entries = _check_type(raw.get("physical_functions", []), "list", f"{source}: physical_functions")
    config["physical_functions"] = []
    for position, entry in enumerate(entries):
        where = f"{source}: physical_functions[{position}]."
        _check_type(entry, "dict", where.rstrip("."))
        pf = _check_type(entry.get("pf"), "str", f"{where}pf")
        settings = normalize_settings({key: value for key, value in entry.items() if key != "pf"}, where)
        config["physical_functions"].append({"pf": pf, **settings})
    select = _check_type(raw.get("select"), "dict?", f"{source}: select")
    config["select"] = None
    if select is not None:
        unknown = sorted(set(select) - {"pci_ids", "settings"})
        if unknown:
            raise SriovError(f"{source}: select.{unknown[0]} is not a known key; use pci_ids, settings.")
        pci_ids = _check_type(select.get("pci_ids"), "list", f"{source}: select.pci_ids")
        for pci_id in pci_ids:
            if not isinstance(pci_id, str) or not PCI_ID.match(pci_id.lower()):
                raise SriovError(f"{source}: select.pci_ids entry {pci_id!r} is not a vendor:device id like 15b3:1021.")
        if not pci_ids:
            raise SriovError(f"{source}: select.pci_ids is empty; give the PCI ids of the PFs to configure.")
        settings = _check_type(select.get("settings"), "dict", f"{source}: select.settings")
        config["select"] = {
            "pci_ids": [p.lower() for p in pci_ids],
            "settings": normalize_settings(settings, f"{source}: select.settings."),
        }
    return config


def apply_config(host: Host, config: dict[str, Any], check_mode: bool, source: str = "config") -> list[dict[str, Any]]:
    """Apply a loaded config: every PF (``select`` expanded here) is validated before the first write.

    A PF that ``physical_functions`` names is left out of ``select``; naming one PF twice is an error.
    """
    plans: list[dict[str, Any]] = []
    seen: dict[str, str] = {}

    def add(where: str, pf: str, settings: dict[str, Any]) -> None:
        plan = prepare(host, pf, settings, where)
        address = plan["pf"]["pci_address"]
        if address in seen:
            raise SriovError(f"{where}pf {pf!r} is {address}, which {seen[address]}pf names already.")
        seen[address] = where
        plans.append(plan)

    for number, entry in enumerate(config["physical_functions"]):
        settings = {key: value for key, value in entry.items() if key != "pf"}
        add(f"{source}: physical_functions[{number}].", entry["pf"], settings)
    select = config.get("select")
    if select:
        found = select_pfs(host, select["pci_ids"])
        if not found:
            raise SriovError(
                f"{source}: select found no physical function with PCI id {', '.join(select['pci_ids'])} and "
                f"SR-IOV on this host (SR-IOV capable here: {', '.join(capable_pfs(host)) or 'none'})."
            )
        for address in found:
            if address not in seen:
                add(f"{source}: select.settings for {address}: ", address, select["settings"])
    duplicates = duplicate_addresses({plan["pf"]["pci_address"]: plan["desired"] for plan in plans})
    if duplicates:
        raise SriovError(f"{source}: two VFs would get one address: {duplicates[0]}; give each VF its own.")
    return [{"pf": plan["pf"], **execute(host, plan, check_mode)} for plan in plans]
