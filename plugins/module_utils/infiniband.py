# SPDX-License-Identifier: Apache-2.0
"""What the infiniband role checks and writes on one host, as pure functions.

- ``plan``: the role's inputs and the host's plan (catalog profile), validated, with every bad input named.
- ``gpu_hcas``, ``port_findings``: the GPU-network HCAs and what is wrong with their ports (link layer,
  physical link, subnet manager, state, rate, partition membership), from ``hw_facts.gather`` facts.
- ``parse_nccl_ib_hca``, ``nccl_selects``: NCCL_IB_HCA as NCCL parses it (src/misc/utils.cc
  parseStringList/matchIfList and src/transport/net_ib.cc): a leading ``^`` excludes, then a leading
  ``=`` asks for exact names instead of prefixes, entries are comma separated, ``:port`` limits an
  entry to one port (later NCCL versions also read ``:rail:plane`` after it; they do not affect selection).
- ``parse_ucx_net_devices``: UCX_NET_DEVICES as UCX reads it (ucp_context.c): exact resource names,
  ``<rdma device>:<port>`` for InfiniBand, ``all`` anywhere means every device.
- ``env_findings``: the profile's NCCL_IB_HCA and UCX_NET_DEVICES held against the host's RDMA ports.

Standard library (and host_plan): the filters run on the controller, the tests import it directly.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from ansible_collections.gpufabric.cluster.plugins.module_utils import fabric_nics, supply_chain
from ansible_collections.gpufabric.cluster.plugins.module_utils.host_plan import no_profile
from ansible_collections.gpufabric.cluster.plugins.module_utils.supply_chain import PackagePin, PackageStep

FABRIC = "infiniband"
MEMBERSHIPS = ("full", "limited", "any")
FULL_MEMBER = 0x8000
OS_FAMILIES = ("Debian", "RedHat")
# An RDMA device name (mlx5_0, mlx5_ib3, ibp26s0): what sysfs allows in /sys/class/infiniband.
DEVICE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
HEX = re.compile(r"^0[xX][0-9a-fA-F]{1,4}$")
# Linux interface names hold at most 15 characters (IFNAMSIZ 16 with the terminating NUL).
IFNAME_MAX = 15
# Where known NCCL_TOPO_FILE paths come from, so that a missing file can be explained.
TOPO_FILE_SOURCES = {
    "/opt/microsoft/ndv5/topo.xml": (
        "Azure's HPC images ship it: Azure/azhpc-images topology/ndv5-topo.xml, installed as "
        "/opt/microsoft/ndv5-topo.xml and linked here by customizations/ndv5.sh (ND H100/H200 v5)"
    ),
    "/opt/microsoft/ndv5-topo.xml": (
        "Azure's HPC images ship it: Azure/azhpc-images topology/ndv5-topo.xml (ND H100/H200 v5)"
    ),
    "/opt/microsoft/ndv4-topo.xml": (
        "Azure's HPC images ship it: Azure/azhpc-images topology/ndv4-topo.xml (ND A100 v4)"
    ),
}


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------


def parse_pkey(value: Any) -> tuple[int | None, str | None]:
    """(partition number without the membership bit, error). Empty means no partition.

    Accepted: an integer (YAML reads an unquoted 0x8001 as 32769) or a hex string "0x8001".
    A decimal string is refused because "8001" reads as hex to people and as decimal to YAML.
    The kernel refuses P_Key 0x0000 and 0x8000 (ipoib_vlan.c), so the partition is 0x0001-0x7fff.
    """
    if value in (None, ""):
        return None, None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, str) and HEX.match(value.strip()):
        number = int(value.strip(), 16)
    else:
        number = None
    if number is None or not 0 < number <= 0xFFFF or number & 0x7FFF == 0:
        return None, (
            f"infiniband_pkey {value!r} is not a partition key; accepted: a quoted hex string from '0x0001' to "
            "'0x7fff', or with the full-membership bit from '0x8001' to '0xffff' (both name the same partition), "
            "or the same as an integer; empty for no partition"
        )
    return number & 0x7FFF, None


def pkey_text(number: int) -> str:
    return f"0x{number:04x}"


def required_pkeys(partition: int, membership: str) -> list[str]:
    """P_Key table entries that satisfy the membership: full 0x8001, limited 0x0001, any either."""
    full, limited = pkey_text(partition | FULL_MEMBER), pkey_text(partition)
    return {"full": [full], "limited": [limited], "any": [full, limited]}[membership]


def merged_env(env: dict[str, Any], extra: dict[str, Any]) -> dict[str, str]:
    """The catalog environment with site overrides; None drops a variable (as nccl_env does)."""
    merged = {**env, **extra}
    return {key: str(value) for key, value in merged.items() if value is not None}


class PkeyPlan(TypedDict):
    partition: str  # 0x0001-0x7fff, without the membership bit
    child: str  # the P_Key the IPoIB child joins with (full-membership bit set)
    suffix: str  # the child interface's name suffix
    membership: str
    table_entries: list[str]  # P_Key table entries that satisfy the membership


class SharpPackage(TypedDict):
    name: str
    version: str
    spec: str  # name=version (apt) or name-version (dnf)


class InfinibandPlan(TypedDict):
    profile: str
    fabric: str
    count: int  # GPU-network HCAs of the profile
    speed_gbit_s: float  # the port rate required
    devices: list[str]  # HCA names: infiniband_devices or the profile's rdma_devices
    pkey: PkeyPlan | None
    env: dict[str, str]  # the profile's environment with infiniband_env_extra
    topo_file: str  # NCCL_TOPO_FILE, empty when unset
    topo_file_hint: str  # where that file comes from, for the message when it is missing
    sharp_packages: list[SharpPackage]
    sharp_install: list[PackagePin]  # the same pins as gpufabric.cluster.vendor_packages takes them
    supply: list[PackageStep]  # the SHARP packages, when installed: what gpufabric plan shows
    errors: list[str]
    warnings: list[str]


def plan(settings: dict[str, Any], host_plan: dict[str, Any], facts: dict[str, Any]) -> InfinibandPlan:
    """Validate the role's inputs against the host's plan (gpufabric_plan).

    ``settings`` holds the role variables without the ``infiniband_`` prefix; ``facts`` are ansible_facts
    (os_family). Returns the values the tasks use and ``errors``, one sentence per bad input.
    """
    errors: list[str] = []
    profile = str(host_plan.get("profile") or "unknown")
    fabric = str(host_plan.get("fabric") or "unknown")
    if profile == "unknown":
        # The plan says why (which gpufabric_profile, or which cloud instance type, the catalog lacks).
        errors.append(f"{no_profile(host_plan)}; `gpufabric catalog list` shows the accepted names")
    elif fabric != FABRIC:
        errors.append(
            f"profile {profile!r} is a {fabric} profile; this role serves fabric {FABRIC} "
            f"(Nebius gpu-*-sxm, Azure ND v5, baremetal/hgx-*-ib-*); use the {fabric} fabric's role"
        )
    gpu = (host_plan.get("nics") or {}).get("gpu") or {}

    devices = list(settings.get("devices") or [])
    bad = [name for name in devices if not isinstance(name, str) or not DEVICE_NAME.match(name)]
    if bad:
        errors.append(f"infiniband_devices {bad!r} are not RDMA device names; accepted: names such as mlx5_0")
    if not devices:
        devices = list(gpu.get("rdma_devices") or [])

    rate = settings.get("rate_gbit_s") or 0
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate < 0:
        errors.append(f"infiniband_rate_gbit_s {rate!r} is not a rate; accepted: a number of Gb/s, 0 for the profile's")
        rate = 0
    speed = rate or gpu.get("speed_gbit_s") or 0

    membership = settings.get("pkey_membership", "full")
    if membership not in MEMBERSHIPS:
        errors.append(f"infiniband_pkey_membership {membership!r} is not accepted; accepted: {', '.join(MEMBERSHIPS)}")
        membership = "full"
    partition, error = parse_pkey(settings.get("pkey"))
    if error:
        errors.append(error)
    pkey: dict[str, Any] | None = None
    if partition is not None:
        child = partition | FULL_MEMBER
        pkey = {
            "partition": pkey_text(partition),
            # What the boot unit passes to `ip link add ... type ipoib pkey` and the child's name suffix:
            # IPoIB always joins with the full-membership bit set; the kernel's ib_find_pkey() falls back
            # to the limited entry of the same partition (drivers/infiniband/core/device.c).
            "child": pkey_text(child),
            "suffix": f"{child:04x}",
            "membership": membership,
            "table_entries": required_pkeys(partition, membership),
        }

    wait = settings.get("ipoib_wait_s", 60)
    if isinstance(wait, bool) or not isinstance(wait, int) or wait < 1:
        errors.append(f"infiniband_ipoib_wait_s {wait!r} is not accepted; accepted: whole seconds, at least 1")
    ipoib = bool(settings.get("ipoib"))
    if ipoib and pkey and settings.get("bake") and not devices:
        errors.append(
            f"infiniband_ipoib with infiniband_pkey {pkey['child']} needs the HCA names for the boot unit, and "
            f"profile {profile!r} does not list rdma_devices: set infiniband_devices (e.g. [mlx5_0, ..., mlx5_7])"
        )

    extra = settings.get("env_extra") or {}
    if not isinstance(extra, dict):
        errors.append(f"infiniband_env_extra {extra!r} is not a mapping; accepted: variable name -> string or null")
        extra = {}
    bad_env = [key for key in extra if not isinstance(key, str) or not ENV_NAME.match(key)]
    bad_env += [key for key, value in extra.items() if isinstance(value, (bool, dict, list))]
    if bad_env:
        errors.append(
            f"infiniband_env_extra: {sorted(set(map(str, bad_env)))} are not accepted; accepted: variable names "
            "(A-Z, 0-9, _) mapped to strings or numbers, or to null to drop a variable (quote true/false)"
        )
        extra = {}

    os_family = facts.get("os_family")
    sharp = bool(settings.get("sharp"))
    sharp_packages = settings.get("sharp_packages") or {}
    specs: list[dict[str, str]] = []
    if sharp:
        if os_family not in OS_FAMILIES:
            errors.append(
                f"infiniband_sharp: OS family {os_family!r} is not supported; accepted: {', '.join(OS_FAMILIES)}"
            )
        if not isinstance(sharp_packages, dict) or not sharp_packages:
            errors.append(
                "infiniband_sharp is true but infiniband_sharp_packages is empty: name the SHARP packages of the "
                "DOCA/MLNX_OFED repository with exact versions (`apt-cache madison sharp` or "
                "`dnf list --showduplicates sharp` lists them), e.g. {sharp: '<version>'}"
            )
            sharp_packages = {}
        for name, version in sharp_packages.items():
            if version in (None, "") or isinstance(version, (bool, dict, list)):
                errors.append(
                    f"infiniband_sharp_packages: {name!r} has version {version!r}; every package needs an exact version"
                )
                continue
            specs.append({"name": str(name), "version": str(version), "spec": package_spec(os_family, name, version)})

    env = merged_env(host_plan.get("env") or {}, extra)
    return {
        "profile": profile,
        "fabric": fabric,
        "count": int(gpu.get("count") or 0),
        "speed_gbit_s": speed,
        "devices": devices,
        "pkey": pkey,
        "env": env,
        "topo_file": env.get("NCCL_TOPO_FILE", ""),
        "topo_file_hint": topo_file_hint(env.get("NCCL_TOPO_FILE", "")),
        "sharp_packages": specs,
        # From the DOCA/MLNX_OFED repository rdma_stack configured, held.
        "sharp_install": [supply_chain.package(spec["name"], spec["version"]) for spec in specs],
        "supply": [supply_chain.step([supply_chain.package(spec["name"], spec["version"]) for spec in specs])]
        if specs
        else [],
        "errors": errors,
        "warnings": [],
    }


def package_spec(os_family: str | None, name: str, version: Any) -> str:
    """How the package manager is asked for one exact version: apt name=version, dnf name-version."""
    return f"{name}={version}" if os_family == "Debian" else f"{name}-{version}"


def topo_file_hint(path: str) -> str:
    if not path:
        return ""
    return TOPO_FILE_SOURCES.get(path, "the catalog profile's sources name the image or package that ships it")


# ---------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------


def _is_infiniband(device: dict[str, Any]) -> bool:
    return any(port.get("link_layer") == "InfiniBand" for port in device.get("ports") or [])


def _names(items: list[str]) -> str:
    return ", ".join(items)


def gpu_hcas(facts: dict[str, Any], the_plan: dict[str, Any]) -> dict[str, Any]:
    """The GPU-network HCAs: the named ones (infiniband_devices, else the profile's rdma_devices), or,
    for profiles that name none (bare metal), every ConnectX device with an InfiniBand port.

    Returns {"names": the HCAs found, "problems": sentences}.
    """
    present = {device["name"]: device for device in facts.get("rdma_devices") or []}
    wanted = the_plan.get("devices") or []
    if wanted:
        missing = [name for name in wanted if name not in present]
        problems = []
        if missing:
            problems.append(
                f"GPU-network HCA{'s' if len(missing) > 1 else ''} {_names(missing)} "
                f"{'are' if len(missing) > 1 else 'is'} missing (no /sys/class/infiniband entry; found: "
                f"{_names(sorted(present)) or 'no RDMA device'})"
            )
        return {"names": [name for name in wanted if name in present], "problems": problems}
    found = sorted(
        name
        for name, device in present.items()
        # SR-IOV virtual functions (the sriov role's, for pods) are not GPU-network HCAs of the host.
        if device.get("kind") == "connectx" and _is_infiniband(device) and not device.get("is_virtual_function")
    )
    problems = []
    count = the_plan.get("count") or 0
    if len(found) < count:
        problems.append(
            f"found {len(found)} ConnectX InfiniBand HCA{'s' if len(found) != 1 else ''} "
            f"({_names(found) or 'none'}) of the profile's {count}; name them in infiniband_devices if the "
            "GPU network is on other devices"
        )
    return {"names": found, "problems": problems}


def _gbit(value: float) -> str:
    return f"{value:g} Gb/s"


def _where(device: dict[str, Any], port: dict[str, Any]) -> str:
    """mlx5_3 for a single-port HCA (the usual case), mlx5_3 port 2 otherwise."""
    if len(device.get("ports") or []) > 1:
        return f"{device['name']} port {port.get('port')}"
    return str(device["name"])


def port_findings(facts: dict[str, Any], the_plan: dict[str, Any], names: list[str]) -> list[str]:
    """What is wrong with the ports of the named HCAs, one sentence per kind of problem.

    Per port, the first failing check wins, in the order an operator would look: link layer, physical
    link, subnet manager (LID and SM LID 0 mean no SM configured the port, which also leaves it INIT),
    logical state, rate. The partition check is independent of those.
    """
    devices = {device["name"]: device for device in facts.get("rdma_devices") or []}
    speed = the_plan.get("speed_gbit_s") or 0
    pkey = the_plan.get("pkey")
    out: list[str] = []
    no_sm: list[str] = []
    outside: list[str] = []
    for name in names:
        device = devices.get(name)
        if device is None:
            continue
        ports = device.get("ports") or []
        if not ports:
            out.append(f"{name} has no ports under /sys/class/infiniband/{name}/ports")
        for port in ports:
            where = _where(device, port)
            layer, phys, state = port.get("link_layer"), port.get("phys_state"), port.get("state")
            if layer != "InfiniBand":
                out.append(
                    f"{where} is {layer or 'of unknown link layer'}, not InfiniBand (it cannot carry this fabric)"
                )
                continue
            if phys != "LinkUp":
                out.append(
                    f"{where} has no physical link ({phys}): check the cable, the transceiver and the switch port"
                )
                continue
            if not port.get("lid") or not port.get("sm_lid"):
                no_sm.append(where)
                continue
            if state != "ACTIVE":
                out.append(f"{where} is {state} (LinkUp); expected ACTIVE")
                continue
            rate = port.get("rate_gbit_s")
            if speed and rate is not None and rate < speed:
                out.append(
                    f"{where} runs at {_gbit(rate)}; expected {_gbit(speed)} "
                    "(check the cable and the switch port speed)"
                )
            if pkey and not set(pkey["table_entries"]) & set(port.get("pkeys") or []):
                outside.append(f"{where} ({_names(port.get('pkeys') or []) or 'empty table'})")
    if no_sm:
        out.insert(
            0,
            f"no subnet manager has configured {_names(no_sm)} (LID 0): "
            "start opensm/UFM on the fabric or check the switch",
        )
    if outside and pkey:
        entries = " or ".join(pkey["table_entries"])
        out.append(
            f"partition {pkey['partition']} ({pkey['membership']} membership, P_Key {entries}) is not in the P_Key "
            f"table of {_names(outside)}: add these ports' GUIDs to the partition on the subnet manager "
            "(opensm partitions.conf or UFM)"
        )
    return out


# ---------------------------------------------------------------------------
# NCCL_IB_HCA and UCX_NET_DEVICES
# ---------------------------------------------------------------------------


def parse_nccl_ib_hca(value: str | None) -> dict[str, Any]:
    """{"exclude", "exact", "entries": [{"name", "port"}], "errors"} as NCCL reads the value.

    NCCL skips empty entries and entries without a name (":1"); those are reported in ``errors`` here
    because they are typos. A port that is not a number reads as 0 in older NCCL (atoi), which matches
    no port: reported too.
    """
    text = value or ""
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    entries: list[dict[str, Any]] = []
    errors: list[str] = []
    for raw in text.split(","):
        if not raw:
            continue
        name, colon, rest = raw.partition(":")
        if not name:
            errors.append(f"entry {raw!r} has no device name (NCCL ignores it)")
            continue
        port: int | None = None
        port_text = rest.split(":")[0] if colon else ""
        if port_text:
            if not port_text.isdigit() or int(port_text) < 1:
                errors.append(
                    f"entry {raw!r} has port {port_text!r}, which is not a port number (NCCL matches no port)"
                )
                continue
            port = int(port_text)
        entries.append({"name": name, "port": port})
    return {"exclude": exclude, "exact": exact, "entries": entries, "errors": errors}


def _nccl_entry_matches(entry: dict[str, Any], exact: bool, device: str, port: int) -> bool:
    name_ok = device == entry["name"] if exact else device.startswith(entry["name"])
    return name_ok and (entry["port"] is None or entry["port"] == port)


def nccl_selects(spec: dict[str, Any], device: str, port: int) -> bool:
    """Whether NCCL's IB transport would use this device port (before its ACTIVE and link-layer filter).

    As in net_ib.cc: an empty list matches everything, and ``^`` inverts the match (so "^" alone
    excludes every device, as NCCL does).
    """
    entries = spec["entries"]
    hit = True if not entries else any(_nccl_entry_matches(e, spec["exact"], device, port) for e in entries)
    return hit != spec["exclude"]


def parse_ucx_net_devices(value: str | None) -> dict[str, Any]:
    """{"all", "entries": [{"text", "name", "port"}], "errors"}: UCX matches whole resource names."""
    entries: list[dict[str, Any]] = []
    errors: list[str] = []
    everything = False
    for raw in (value or "").split(","):
        if not raw:
            continue
        if raw == "all":
            everything = True
            continue
        name, colon, port_text = raw.partition(":")
        port: int | None = None
        if colon:
            if not port_text.isdigit() or int(port_text) < 1:
                errors.append(f"entry {raw!r} has port {port_text!r}, which is not a port number")
                continue
            port = int(port_text)
        entries.append({"text": raw, "name": name, "port": port})
    return {"all": everything or (not entries and not errors), "entries": entries, "errors": errors}


def env_errors(env: dict[str, str], profile: str) -> list[str]:
    """NCCL_IB_HCA and UCX_NET_DEVICES entries that NCCL or UCX would skip (typos), host or not.

    The role reports the same parse errors against the host's ports (``env_findings``); the catalog
    loader refuses them at load time.
    """
    out = []
    for name, parse in (("NCCL_IB_HCA", parse_nccl_ib_hca), ("UCX_NET_DEVICES", parse_ucx_net_devices)):
        if name in env:
            # A placeholder ({nics.gpu_rdma:1}) is checked as the one name it stands for (the host fills it in).
            shown = fabric_nics.PLACEHOLDER.sub(_stand_in, str(env[name]))
            out += [f"{profile}: {name}={env[name]}: {error}" for error in parse(shown)["errors"]]
    return out


def _stand_in(match: re.Match[str]) -> str:
    return "device" + (f":{match.group(3)}" if match.group(3) else "")


def _ports(facts: dict[str, Any]) -> list[tuple[str, int, str | None]]:
    """(device, port, link layer) for every RDMA port of the host."""
    return [
        (device["name"], int(port.get("port") or 0), port.get("link_layer"))
        for device in facts.get("rdma_devices") or []
        for port in device.get("ports") or []
    ]


def _nccl_findings(value: str | None, ports: list[tuple[str, int, str | None]], hcas: list[str]) -> list[str]:
    label = "NCCL_IB_HCA (not set: every port)" if value is None else f"NCCL_IB_HCA={value}"
    spec = parse_nccl_ib_hca(value)
    out = [f"{label}: {error}" for error in spec["errors"]]
    if not spec["exclude"]:
        for entry in spec["entries"]:
            if not any(_nccl_entry_matches(entry, spec["exact"], d, p) for d, p, _layer in ports):
                what = "device" if spec["exact"] else "device name prefix"
                port = f" port {entry['port']}" if entry["port"] is not None else ""
                out.append(
                    f"{label} names {what} {entry['name']}{port}, which matches no RDMA port on this host "
                    f"(found: {_names(sorted({port[0] for port in ports})) or 'none'})"
                )
    # NCCL's IB transport uses InfiniBand and Ethernet (RoCE) ports alike; a RoCE port among IB rails breaks them.
    selected = [
        (d, p, layer) for d, p, layer in ports if nccl_selects(spec, d, p) and layer in ("InfiniBand", "Ethernet")
    ]
    foreign = [f"{d} port {p} ({layer})" for d, p, layer in selected if layer != "InfiniBand"]
    if foreign:
        out.append(
            f"{label} also selects {_names(foreign)}, which {'is' if len(foreign) == 1 else 'are'} not InfiniBand: "
            "NCCL would use it as a rail; narrow the value (a prefix that excludes it, an =exact list, or ^name)"
        )
    left_out = [name for name in hcas if not any(port[0] == name for port in selected)]
    if left_out:
        out.append(f"{label} leaves out the GPU-network HCA{'s' if len(left_out) > 1 else ''} {_names(left_out)}")
    return out


def _ucx_findings(value: str, ports: list[tuple[str, int, str | None]], hcas: list[str]) -> list[str]:
    label = f"UCX_NET_DEVICES={value}"
    spec = parse_ucx_net_devices(value)
    out = [f"{label}: {error}" for error in spec["errors"]]
    if spec["all"]:
        return out
    layers = {(d, p): layer for d, p, layer in ports}
    devices = {port[0] for port in ports}
    for entry in spec["entries"]:
        name, port = entry["name"], entry["port"]
        if port is None:
            if name in devices:
                out.append(
                    f"{label} names {name} without a port; UCX names InfiniBand devices {name}:<port>, e.g. {name}:1"
                )
            else:
                out.append(
                    f"{label} names {name}, which is not an InfiniBand port "
                    "(UCX would use it as a TCP netdev, if at all)"
                )
        elif (name, port) not in layers:
            where = f"{name} has no port {port}" if name in devices else f"there is no RDMA device {name}"
            out.append(f"{label} names {entry['text']}, which is missing on this host ({where})")
        elif layers[(name, port)] != "InfiniBand":
            out.append(f"{label} names {entry['text']}, which is {layers[(name, port)]}, not InfiniBand")
    named = {entry["name"] for entry in spec["entries"] if entry["port"] is not None}
    left_out = [name for name in hcas if name not in named]
    if left_out:
        out.append(f"{label} leaves out the GPU-network HCA{'s' if len(left_out) > 1 else ''} {_names(left_out)}")
    return out


def env_findings(facts: dict[str, Any], env: dict[str, str], hcas: list[str]) -> list[str]:
    """The profile's NCCL_IB_HCA and UCX_NET_DEVICES against the host's RDMA ports.

    Both are checked when set; NCCL_IB_HCA also when unset (NCCL then uses every IB and RoCE port).
    """
    ports = _ports(facts)
    out = _nccl_findings(env.get("NCCL_IB_HCA"), ports, hcas)
    if "UCX_NET_DEVICES" in env:
        out += _ucx_findings(env["UCX_NET_DEVICES"], ports, hcas)
    return out
