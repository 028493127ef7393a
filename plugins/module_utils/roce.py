# SPDX-License-Identifier: Apache-2.0
"""What the roce role checks and configures on a RoCE host: GID table, traffic class, QoS.

Pure Python (standard library and fabric_findings) so that the parts molecule cannot reach on real hardware are
unit-tested: which RDMA devices are the GPU network, whether the GID at NCCL_IB_GID_INDEX is what
NCCL needs, how NCCL_IB_TC becomes a DSCP and a priority, whether PFC and ECN cover that priority,
and how values read back from sysfs compare with the configuration.

Facts used here (sources in roles/roce/README.md):
- The GRH traffic class of a RoCE v2 packet is the IP header's TOS byte: DSCP in the upper six bits,
  ECN in the lower two, so DSCP = TC >> 2 (Oracle's RoCE script: "(26 << 2) | 0x1 = 105").
- With DSCP trust, ConnectX maps DSCP d to priority d >> 3 unless mlnx_qos --dscp2prio says otherwise
  (mlnx_qos's default mapping table).
- rdma_cm's configfs accepts "IB/RoCE v1" or "RoCE v2" as default_roce_mode and 0-255 as
  default_roce_tos (Linux Documentation/ABI/testing/configfs-rdma_cm).
- MLNX_OFED's tc/<port>/traffic_class reads "Global tclass=<n>" once set (mlx5 driver source).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import fabric_findings

TRUST = ("dscp", "pcp", "none")
VERSIONS = {"v2": "RoCE v2", "v1": "IB/RoCE v1", "none": ""}
GID_V2 = "RoCE v2"
IPV4_MAPPED = re.compile(r"^0000:0000:0000:0000:0000:ffff:([0-9a-f]{4}):([0-9a-f]{4})$")
INTEGER = re.compile(r"^[0-9]+$")
GLOBAL_TCLASS = re.compile(r"^Global tclass=([0-9]+)")
# What provides mlnx_qos, per OS family: the mlnx-tools package of DOCA-OFED and MLNX_OFED. Ubuntu's archive has no
# package with it (packages.ubuntu.com knows only networking-mlnx, an OpenStack agent), so a Canonical image with the
# inbox rdma-core stack has none; Fedora packages mlnx-tools (from 39), RHEL only through DOCA or MLNX_OFED.
QOS_TOOL_PACKAGES = {
    "Debian": (
        "mlnx-tools (DOCA-OFED or MLNX_OFED, not the inbox rdma-core stack nor Ubuntu's archive; "
        "apt install mlnx-tools from the DOCA repository)"
    ),
    "RedHat": "mlnx-tools (DOCA-OFED or MLNX_OFED; dnf install mlnx-tools from the DOCA repository)",
}
# What gives the RDMA interfaces their IPv4 addresses, per cloud, for the GID check's message: a RoCE v2 GID on IPv4
# exists only once the interface has an address (the kernel adds one GID per address and RoCE version).
ADDRESS_SETUP = {
    "oci": (
        "on OCI, Oracle's images address them with the oci-rdma-configure service (OCI-CN-AUTH packages, "
        "/etc/oci-hpc/rdma-network.conf, default 192.168.0.0/16) once wpa_supplicant-wired@rdmaN has passed the "
        "cluster network's 802.1X authentication (oracle-quickstart/oci-hpc playbooks/roles/rdma-interface, "
        "healthchecks/files/check_gpu_setup.py); a plain Canonical image has neither, and gpufabric does not "
        "address them"
    ),
}


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def _int(value: Any, name: str, low: int, high: int, errors: list[str]) -> int | None:
    """An integer in [low, high] from an int or a decimal string; otherwise an error naming ``name``."""
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, str) and INTEGER.match(value.strip()):
        number = int(value.strip())
    else:
        number = None
    if number is None or not low <= number <= high:
        errors.append(f"{name} is {value!r}; accepted: an integer from {low} to {high}")
        return None
    return number


def tc_to_dscp(traffic_class: int) -> int:
    """DSCP of a RoCE v2 traffic class (IP TOS byte): its upper six bits."""
    return traffic_class >> 2


def tc_ecn(traffic_class: int) -> int:
    """ECN codepoint carried in the traffic class's lower two bits (0 Not-ECT, 1 ECT(1), 2 ECT(0))."""
    return traffic_class & 0x3


def default_priority(dscp: int) -> int:
    """ConnectX's default DSCP-to-priority mapping under DSCP trust."""
    return dscp >> 3


def qos_tool_package(os_family: str) -> str:
    return QOS_TOOL_PACKAGES.get(os_family, QOS_TOOL_PACKAGES["Debian"])


def gid_text(gid: str) -> str:
    """A GID as an IPv6 address: IPv4-mapped ones as ::ffff:a.b.c.d (as show_gids prints them), others compressed."""
    match = IPV4_MAPPED.match(gid.lower())
    if match:
        high, low = (int(part, 16) for part in match.groups())
        return f"::ffff:{high >> 8}.{high & 0xFF}.{low >> 8}.{low & 0xFF}"
    try:
        return str(ipaddress.IPv6Address(gid))
    except ValueError:
        return gid


def is_ipv4_mapped(gid: str) -> bool:
    return bool(IPV4_MAPPED.match(gid.lower()))


# ---------------------------------------------------------------------------
# Which RDMA devices are the GPU network
# ---------------------------------------------------------------------------


def hca_patterns(nccl_ib_hca: str) -> tuple[list[str], list[str]]:
    """(include, exclude) shell patterns for device names from an NCCL_IB_HCA value.

    NCCL_IB_HCA is a comma-separated list of device-name prefixes; a leading ^ excludes the list,
    a leading = (after ^ if both) matches exact names, and :<port> suffixes select ports (dropped
    here: QoS is per device). An empty value includes every device.
    """
    value = (nccl_ib_hca or "").strip()
    exclude = value.startswith("^")
    if exclude:
        value = value[1:]
    exact = value.startswith("=")
    if exact:
        value = value[1:]
    names = [item.split(":")[0].strip() for item in value.split(",") if item.split(":")[0].strip()]
    patterns = [name if exact else f"{name}*" for name in names]
    if exclude:
        return ["*"], patterns
    return patterns or ["*"], []


def device_patterns(devices: list[str], plan: dict[str, Any]) -> tuple[list[str], list[str], str]:
    """(include, exclude, source) for the GPU-network devices: explicit list, catalog names, or NCCL_IB_HCA."""
    if devices:
        return list(devices), [], "roce_devices"
    names = (plan.get("nics", {}).get("gpu", {}) or {}).get("rdma_devices") or []
    if names:
        return list(names), [], "the catalog's nics.gpu.rdma_devices"
    include, exclude = hca_patterns(str(plan.get("env", {}).get("NCCL_IB_HCA", "")))
    return include, exclude, "the catalog's NCCL_IB_HCA"


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def select_devices(
    hardware: dict[str, Any], include: list[str], exclude: list[str], exclude_netdevs: list[str]
) -> list[dict[str, Any]]:
    """RoCE devices (ConnectX, Ethernet link layer) matching the patterns, not on an excluded netdev.

    Never on the default route's interface either, whatever the patterns say: the management NIC carries it
    (fabric_findings.default_route_nics), and on OCI bare metal it is a ConnectX port on the rails' driver.
    """
    exclude_netdevs = list(exclude_netdevs) + [nic["name"] for nic in fabric_findings.default_route_nics(hardware)]
    selected = []
    for device in hardware.get("rdma_devices", []) or []:
        ports = device.get("ports") or []
        if not ports or ports[0].get("link_layer") != "Ethernet":
            continue
        name = device.get("name", "")
        if not _matches(name, include) or _matches(name, exclude):
            continue
        if device.get("netdev") and device["netdev"] in exclude_netdevs:
            continue
        selected.append(device)
    return selected


# ---------------------------------------------------------------------------
# GID table
# ---------------------------------------------------------------------------


def _table(gids: list[dict[str, Any]]) -> str:
    if not gids:
        return "no valid GID"
    return "; ".join(
        f"{gid['index']} {gid_text(gid['gid'])} ({gid.get('type') or 'no type'}"
        + (f", {gid['netdev']})" if gid.get("netdev") else ")")
        for gid in gids
    )


def gid_errors(
    devices: list[dict[str, Any]], index: int | None, require_ipv4: bool, address_setup: str = ""
) -> list[str]:
    """One message per device port whose GID table cannot give NCCL a RoCE v2 GID.

    ``index`` is NCCL_IB_GID_INDEX; None means NCCL picks the GID itself, so any RoCE v2 GID (on an
    IPv4 address when ``require_ipv4``) will do. Where such a port has no IPv4 GID at any index, its interface has
    no IPv4 address (the kernel adds a GID per address): a last message names those interfaces and, from
    ``address_setup``, what configures them.
    """
    errors = []
    unaddressed: list[str] = []
    for device in devices:
        for port in device.get("ports") or []:
            where = f"{device['name']} port {port.get('port', 1)}"
            gids = port.get("gids") or []
            message = _gid_error(where, gids, index, require_ipv4)
            if not message:
                continue
            errors.append(message)
            if not any(is_ipv4_mapped(str(gid.get("gid", ""))) for gid in gids):
                unaddressed.append(f"{device.get('netdev') or 'no interface'} ({device['name']})")
    if unaddressed:
        errors.append(
            f"no IPv4 address on {', '.join(dict.fromkeys(unaddressed))}: a RoCE v2 GID on IPv4 exists only once the "
            "interface has one, so configure their addresses first" + (f"; {address_setup}" if address_setup else "")
        )
    return errors


def _gid_error(where: str, gids: list[dict[str, Any]], index: int | None, require_ipv4: bool) -> str:
    """Why one port's GID table cannot give NCCL a RoCE v2 GID ("" where it can)."""
    wanted = "a RoCE v2 GID" + (" on an IPv4 address" if require_ipv4 else "")
    if index is None:
        fits = [g for g in gids if g.get("type") == GID_V2 and (is_ipv4_mapped(g["gid"]) or not require_ipv4)]
        return "" if fits else f"{where} has no {wanted[2:]} for NCCL to pick; the table has: {_table(gids)}"
    entry = next((gid for gid in gids if gid.get("index") == index), None)
    if entry is None:
        problem = f"GID index {index} is empty"
    elif entry.get("type") != GID_V2:
        problem = f"GID index {index} is {entry.get('type') or 'untyped'} ({gid_text(entry['gid'])})"
    elif require_ipv4 and not is_ipv4_mapped(entry["gid"]):
        problem = f"GID index {index} is RoCE v2 on {gid_text(entry['gid'])}, not an IPv4 address"
    else:
        return ""
    return f"{where}: {problem}; NCCL_IB_GID_INDEX={index} needs {wanted} there. The table has: {_table(gids)}"


# ---------------------------------------------------------------------------
# The plan: values for the configuration file, checked before anything changes
# ---------------------------------------------------------------------------


def _priorities(value: Any, name: str, errors: list[str]) -> list[int]:
    if not isinstance(value, list):
        errors.append(f"{name} is {value!r}; accepted: a list of priorities 0-7 (empty: leave alone)")
        return []
    out: list[int] = []
    for item in value:
        number = _int(item, f"{name} entry", 0, 7, errors)
        if number is not None and number not in out:
            out.append(number)
    return sorted(out)


def _auto_tc(value: Any, name: str, catalog_tc: int | None, errors: list[str]) -> int | None:
    """'auto' -> the catalog's NCCL_IB_TC (None when it has none), 'none' -> None, else 0-255."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return catalog_tc
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    number = _int(value, name, 0, 255, [])
    if number is None:
        errors.append(f"{name} is {value!r}; accepted: auto (the catalog's NCCL_IB_TC), none, or 0-255")
    return number


def catalog_numbers(env: dict[str, str], errors: list[str]) -> tuple[int | None, int | None, int]:
    """NCCL_IB_TC, NCCL_IB_GID_INDEX (None: unset, NCCL picks) and NCCL_IB_SL as numbers; an error for each bad one."""
    catalog_tc = None
    if "NCCL_IB_TC" in env:
        catalog_tc = _int(env["NCCL_IB_TC"], "the catalog's NCCL_IB_TC", 0, 255, errors)
    gid_index = None
    if "NCCL_IB_GID_INDEX" in env and env["NCCL_IB_GID_INDEX"].strip() not in ("", "-1"):
        gid_index = _int(env["NCCL_IB_GID_INDEX"], "the catalog's NCCL_IB_GID_INDEX", 0, 255, errors)
    service_level = _int(env.get("NCCL_IB_SL", "0"), "the catalog's NCCL_IB_SL", 0, 15, errors) or 0
    return catalog_tc, gid_index, service_level


def env_errors(env: dict[str, str], profile: str) -> list[str]:
    """The catalog environment's RoCE numbers as the role reads them; the catalog loader checks them too."""
    errors: list[str] = []
    catalog_numbers(env, errors)
    return [f"{profile}: {error}" for error in errors]


class RocePlan(TypedDict):
    errors: list[str]  # one message per bad input; the role fails on them before any change
    warnings: list[str]
    gid_index: int | None  # NCCL_IB_GID_INDEX; None: NCCL picks the GID
    catalog_tc: int | None  # the catalog's NCCL_IB_TC
    dscp: int  # DSCP of the traffic class NCCL sends
    ecn_bits: int  # ECN codepoint in that traffic class
    priority: int | None  # the priority NCCL's traffic lands on; None under trust none
    priority_basis: str  # how that priority follows from the settings, for the report
    trust: str
    dscp2prio: list[list[int]]  # [DSCP, priority] pairs, sorted
    pfc: list[int]
    ecn: list[int]
    traffic_class: int | None  # the driver's global traffic class; None: left alone
    default_tos: int | None  # rdma_cm's default ToS; None: left alone
    roce_version: str  # rdma_cm's default_roce_mode text; empty: left alone
    wait_seconds: int
    include: list[str]  # shell patterns of the GPU-network RDMA devices
    exclude: list[str]
    exclude_netdevs: list[str]  # the management NIC, never configured
    expect_devices: int
    device_source: str  # where the device patterns came from, for messages
    needs_qos_tool: bool  # whether mlnx_qos must be installed
    qos_tool_package: str  # what provides mlnx_qos on this OS family
    address_setup: str  # what gives the RDMA interfaces their IPv4 addresses on this cloud ("" where unknown)


def plan(settings: dict[str, Any], host_plan: dict[str, Any], facts: dict[str, Any]) -> RocePlan:
    """Validate the role's settings against the host's plan and derive what the script applies.

    ``settings``: the role variables without the ``roce_`` prefix; ``host_plan``: gpufabric_plan (the catalog
    profile's env and nics); ``facts``: ansible_facts (os_family). ``errors`` are the inputs the role refuses
    before any change.
    """
    errors: list[str] = []
    warnings: list[str] = []
    env = {key: str(value) for key, value in (host_plan.get("env") or {}).items()}

    catalog_tc, gid_index, service_level = catalog_numbers(env, errors)

    trust = settings.get("trust", "dscp")
    if trust not in TRUST:
        errors.append(f"roce_trust is {trust!r}; accepted: {', '.join(TRUST)}")
    version = settings.get("version", "v2")
    if version not in VERSIONS:
        errors.append(f"roce_version is {version!r}; accepted: {', '.join(VERSIONS)}")

    dscp2prio: dict[int, int] = {}
    raw_map = settings.get("dscp2prio", {})
    if not isinstance(raw_map, dict):
        errors.append(f"roce_dscp2prio is {raw_map!r}; accepted: a mapping of DSCP (0-63) to priority (0-7)")
        raw_map = {}
    for key, value in raw_map.items():
        dscp = _int(key, f"roce_dscp2prio key {key!r}", 0, 63, errors)
        prio = _int(value, f"roce_dscp2prio[{key!r}]", 0, 7, errors)
        if dscp is not None and prio is not None:
            dscp2prio[dscp] = prio
    if dscp2prio and trust != "dscp":
        errors.append(f"roce_dscp2prio is set but roce_trust is {trust!r}; a DSCP mapping needs roce_trust: dscp")

    pfc = _priorities(settings.get("pfc_priorities", []), "roce_pfc_priorities", errors)
    ecn = _priorities(settings.get("ecn_priorities", []), "roce_ecn_priorities", errors)
    traffic_class = _auto_tc(settings.get("traffic_class", "auto"), "roce_traffic_class", catalog_tc, errors)
    default_tos = _auto_tc(settings.get("default_tos", "auto"), "roce_default_tos", catalog_tc, errors)

    wait = _int(settings.get("wait_seconds", 60), "roce_wait_seconds", 0, 3600, errors)
    devices = settings.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(item, str) and item for item in devices):
        errors.append(f"roce_devices is {devices!r}; accepted: a list of RDMA device names or shell patterns")
        devices = []
    include, exclude, source = device_patterns(devices, host_plan)
    nics = host_plan.get("nics") or {}
    # The management NIC, never configured: the plan's names for it, found by identity (gVNIC, ENA, OCI's VNIC as
    # the default route's interface). select_devices also leaves out the default route's interface itself.
    exclude_netdevs = [str(name) for name in (nics.get("management") or {}).get("interfaces") or []]
    explicit = devices and not any(set(item) & set("*?[") for item in devices)
    expect_devices = len(devices) if explicit else int((nics.get("gpu") or {}).get("count") or 0)

    # The priority NCCL's data lands on: what the QoS must cover. NCCL sends TC 0 when NCCL_IB_TC is unset.
    effective_tc = catalog_tc if catalog_tc is not None else 0
    dscp = tc_to_dscp(effective_tc)
    if trust == "dscp":
        priority: int | None = dscp2prio.get(dscp, default_priority(dscp))
        basis = f"NCCL_IB_TC {effective_tc} = DSCP {dscp}, mapped to priority {priority} by " + (
            "roce_dscp2prio" if dscp in dscp2prio else "the default DSCP >> 3 mapping"
        )
    elif trust == "pcp":
        priority = service_level & 0x7
        basis = f"NCCL_IB_SL {service_level} = priority {priority} under PCP trust"
    else:
        priority, basis = None, "roce_trust none: the NIC's trust mode is left alone"
    if priority is not None and pfc and priority not in pfc:
        errors.append(
            f"{basis}, which is not in roce_pfc_priorities {pfc}: NCCL's traffic would be lossy. "
            f"Add {priority} to roce_pfc_priorities or map DSCP {dscp} with roce_dscp2prio"
        )
    if priority is not None and ecn and priority not in ecn:
        errors.append(
            f"{basis}, which is not in roce_ecn_priorities {ecn}: congestion control would not act on "
            f"NCCL's traffic. Add {priority} to roce_ecn_priorities"
        )
    if traffic_class is not None and catalog_tc is not None and traffic_class != catalog_tc:
        warnings.append(
            f"roce_traffic_class {traffic_class} differs from the catalog's NCCL_IB_TC {catalog_tc}; the driver's "
            "global traffic class overrides the value NCCL asks for on every QP"
        )
    if traffic_class is not None and "NCCL_IB_FIFO_TC" in env and env["NCCL_IB_FIFO_TC"] != str(traffic_class):
        warnings.append(
            f"the catalog sets NCCL_IB_FIFO_TC {env['NCCL_IB_FIFO_TC']}, but the global traffic class "
            f"{traffic_class} overrides it; set roce_traffic_class: none to keep NCCL's own classes"
        )
    if catalog_tc is None and (settings.get("traffic_class", "auto") == "auto"):
        warnings.append(
            "the catalog sets no NCCL_IB_TC: NCCL sends traffic class 0, and the traffic class is left alone"
        )
    needs_qos_tool = trust != "none" or bool(pfc) or bool(dscp2prio)

    return {
        "errors": errors,
        "warnings": warnings,
        "gid_index": gid_index,
        "catalog_tc": catalog_tc,
        "dscp": dscp,
        "ecn_bits": tc_ecn(effective_tc),
        "priority": priority,
        "priority_basis": basis,
        "trust": trust,
        "dscp2prio": [[key, dscp2prio[key]] for key in sorted(dscp2prio)],
        "pfc": pfc,
        "ecn": ecn,
        "traffic_class": traffic_class,
        "default_tos": default_tos,
        "roce_version": VERSIONS.get(version, ""),
        "wait_seconds": wait if wait is not None else 60,
        "include": include,
        "exclude": exclude,
        "exclude_netdevs": exclude_netdevs,
        "expect_devices": expect_devices,
        "device_source": source,
        "needs_qos_tool": needs_qos_tool,
        "qos_tool_package": qos_tool_package(str(facts.get("os_family", "Debian"))),
        "address_setup": ADDRESS_SETUP.get(str(host_plan.get("profile", "")).partition("/")[0], ""),
    }


# ---------------------------------------------------------------------------
# Read-back
# ---------------------------------------------------------------------------


def parse_traffic_class(text: str) -> int | None:
    """The traffic_class file: "Global tclass=<n>" from the MLNX_OFED driver, a bare number in a simulated tree."""
    text = text.strip()
    match = GLOBAL_TCLASS.match(text)
    if match:
        return int(match.group(1))
    return int(text) if INTEGER.match(text) else None


def expected_files(devices: list[dict[str, Any]], plan_: dict[str, Any], root: str = "/") -> dict[str, str]:
    """sysfs path (below ``root``) -> expected value, for the settings the live check reads back."""
    base = "/" + root.strip("/") if root.strip("/") else ""
    expected: dict[str, str] = {}
    for device in devices:
        if plan_.get("traffic_class") is not None:
            expected[f"{base}/sys/class/infiniband/{device['name']}/tc/1/traffic_class"] = str(plan_["traffic_class"])
        if plan_.get("ecn") and device.get("netdev"):
            for point in ("roce_np", "roce_rp"):
                for prio in range(8):
                    path = f"{base}/sys/class/net/{device['netdev']}/ecn/{point}/enable/{prio}"
                    expected[path] = "1" if prio in plan_["ecn"] else "0"
    return expected


ABSENT = "<absent>"


def readback_errors(lines: list[str], expected: dict[str, str]) -> list[str]:
    """Compare read-back lines (``path<TAB>value``, value ``<absent>`` for a missing file) with ``expected``.

    One message per mismatch. A missing traffic_class file is not one: only the MLNX_OFED/DOCA driver has
    it, and the script leaves the traffic class to the application (NCCL_IB_TC) there. A missing ECN file
    is one: the settings asked for ECN and the driver cannot take it.
    """
    found: dict[str, str] = {}
    for line in lines:
        path, sep, value = line.partition("\t")
        if sep and path not in found:
            found[path] = value.strip()
    errors = []
    for path, want in expected.items():
        where = _describe(path)
        have = found.get(path, ABSENT)
        if path.endswith("/traffic_class"):
            if have == ABSENT:
                continue
            number = parse_traffic_class(have)
            if number is None or str(number) != want:
                errors.append(f"{where}: traffic class reads {have!r}; expected {want}")
        elif have == ABSENT:
            errors.append(f"{where}: {path} does not exist (ECN needs the MLNX_OFED/DOCA mlx5 driver); expected {want}")
        elif have != want:
            errors.append(f"{where}: {path} reads {have!r}; expected {want}")
    return errors


def _describe(path: str) -> str:
    match = re.search(r"/sys/class/net/([^/]+)/ecn/(roce_np|roce_rp)/enable/([0-7])$", path)
    if match:
        netdev, point, prio = match.groups()
        return f"{netdev} ECN {point} priority {prio}"
    match = re.search(r"/sys/class/infiniband/([^/]+)/tc/", path)
    if match:
        return match.group(1)
    return path
