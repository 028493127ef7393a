# SPDX-License-Identifier: Apache-2.0
"""Per-host health gates: turn what a host reads into one verdict per check, against its profile.

Shared by the ``health_info`` module and the tests; standard library only (it runs on the target's Python).

A verdict is {"check", "subject", "status", "action", "message", "evidence"}:

- ``status`` ``pass``: the host answered and the answer is what the profile expects;
- ``fail``: it is not; ``action`` says what an operator does about it (``monitor``, ``reset_gpu``, ``reboot``,
  ``isolate``) and ``evidence`` holds the values read;
- ``unknown``: the host could not answer (a file missing or unreadable, no kernel log, no earlier reading to
  compare with, a value the catalog does not give). Never ``pass``.

Which action follows from which finding is gpufabric's policy, written here once (``ACTIONS``) and in
docs/health.md; for Xid events it follows NVIDIA's Xid catalog (``XID_CATALOG``, with its source).

``read_host`` does the reading (sysfs below a root, through hw_facts); ``verdicts`` judges a reading. Tests judge
readings of SIMULATED trees (gpufabric.simulated_hw) and canned kernel-log text.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.module_utils import fabric_findings, hw_facts

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
MONITOR, RESET_GPU, REBOOT, ISOLATE = "monitor", "reset_gpu", "reboot", "isolate"
ACTION_ORDER = (MONITOR, RESET_GPU, REBOOT, ISOLATE)  # mildest first

# gpufabric's policy: what an operator does about each kind of finding (docs/health.md, "Actions").
ACTIONS = {
    # A GPU missing from the bus is what Xid 79 reports, whose catalog resolution is RESTART_BM (below).
    "gpu_count": REBOOT,
    # Another GPU than the profile's: no reset or reboot changes it; the inventory or the host is wrong.
    "gpu_model": ISOLATE,
    # A link trains at boot: a reboot retrains it; a link that comes back narrow needs the slot or riser seen to.
    "pcie_link": REBOOT,
    # A fabric port down or slow, or missing: the cable, transceiver or switch port needs someone.
    "fabric_port": ISOLATE,
    "fabric_count": ISOLATE,
    # link_downed rising: the link went down and up since the last reading (a flap).
    "link_downed": ISOLATE,
    # symbol errors rising: a marginal link, still up.
    "symbol_error": MONITOR,
    # Uncorrectable ECC errors since the driver loaded: NVIDIA's recovery for an uncorrectable error is a GPU reset
    # ("Error Recovery and Response Flags", a100-gpu-mem-error-mgmt).
    "ecc_uncorrected": RESET_GPU,
    # "row-remapping will happen at the next GPU reset" (same page).
    "row_remap_pending": RESET_GPU,
    # A failed remap is the page's RMA criterion ("RMA Policy Thresholds for Row-Remapping"): out of service.
    "row_remap_failure": ISOLATE,
    # "pending retirement on the next reboot" (nvidia-smi --help-query-gpu, retired_pages.pending).
    "retired_pages_pending": REBOOT,
    # The GPU slows itself for heat or power: the host stays in service, watched.
    "clock_events": MONITOR,
    # A driver, VBIOS or HCA firmware other than the fleet's majority (gpufabric health): an update to schedule.
    "version_skew": MONITOR,
    # An NVLink link down, or a GPU with fewer links up than its peers: as Xid 74 (NVLINK_ERR) above.
    "nvlink": ISOLATE,
    # Fabric manager or IMEX not running: NVLink (or multi-node NVLink) traffic fails until it runs again; a reboot
    # restarts it in order with the driver.
    "service": REBOOT,
}

# NVIDIA's Xid catalog for Ampere and newer GPUs, column "Resolution Bucket (Immediate Action)":
#   https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (read 2026-12-07 through a search index:
#   its header and rows 1-13 were read there).
# The rows below were read from NVIDIA's own machine-readable copy of that column in NVSentinel,
#   https://github.com/NVIDIA/NVSentinel/blob/6f8b0fcfa8e502bdda78fabf96facef729a9285b/
#   distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv (code, mnemonic, bucket),
# whose rows 8, 11 and 13 agree with the page; NVSentinel names its own workflows where the page has one
# (WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR), and those are marked below.
# Xid 48's action is NVIDIA Health Validation's: https://docs.nvidia.com/health-validation/reference/checks/xid.md
#   (gpu_xid_48, "double bit ECC error", CRITICAL, drain: reset_gpu -> service_required; read 2026-12-07).
XID_CATALOG_SOURCE = (
    "NVIDIA Xid catalog, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, "
    "Resolution Bucket (Immediate Action), as copied in NVIDIA/NVSentinel xiderrorsmapping.csv at 6f8b0fcf"
)
XID_CATALOG: dict[int, dict[str, str]] = {
    8: {"mnemonic": "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "bucket": "RESTART_APP"},
    13: {"mnemonic": "ROBUST_CHANNEL_GR_EXCEPTION", "bucket": "RESTART_APP"},
    31: {"mnemonic": "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "bucket": "RESTART_APP"},
    43: {"mnemonic": "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "bucket": "IGNORE"},
    46: {"mnemonic": "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "bucket": "RESET_GPU"},
    48: {
        "mnemonic": "ROBUST_CHANNEL_GPU_ECC_DBE",
        "bucket": "RESET_GPU",
        "note": "bucket from NVIDIA Health Validation",
    },
    62: {"mnemonic": "PMU_HALT_ERROR", "bucket": "RESET_GPU"},
    63: {"mnemonic": "INFOROM_DRAM_RETIREMENT_EVENT", "bucket": "IGNORE"},
    64: {"mnemonic": "INFOROM_DRAM_RETIREMENT_FAILURE", "bucket": "RESET_GPU"},
    74: {"mnemonic": "NVLINK_ERROR", "bucket": "WORKFLOW_NVLINK_ERR", "note": "NVSentinel's workflow name"},
    79: {"mnemonic": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "bucket": "RESTART_BM"},
    92: {"mnemonic": "EXCESSIVE_SBE_INTERRUPTS", "bucket": "IGNORE"},
    94: {"mnemonic": "ROBUST_CHANNEL_CONTAINED_ERROR", "bucket": "RESTART_APP"},
    95: {"mnemonic": "ROBUST_CHANNEL_UNCONTAINED_ERROR", "bucket": "RESET_GPU"},
    109: {"mnemonic": "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "bucket": "RESET_GPU"},
    119: {"mnemonic": "GSP_RPC_TIMEOUT", "bucket": "RESET_GPU"},
    120: {"mnemonic": "GSP_ERROR", "bucket": "RESET_GPU"},
    136: {"mnemonic": "ALI_TRAINING_FAIL", "bucket": "RESET_GPU"},
    140: {"mnemonic": "UNRECOVERABLE_ECC_ERROR_ESCAPE", "bucket": "RESET_GPU"},
    143: {"mnemonic": "GPU_INIT_ERROR", "bucket": "RESET_GPU"},
}
# gpufabric's policy: the action for each resolution bucket. RESTART_APP asks for the application to be restarted:
# the host itself stays in service, watched. IGNORE: no action, still shown (it is evidence for a later Xid).
BUCKET_ACTIONS = {
    "RESTART_APP": MONITOR,
    "IGNORE": MONITOR,
    "RESET_GPU": RESET_GPU,
    "RESTART_BM": REBOOT,
    "RESTART_VM": REBOOT,
    "WORKFLOW_NVLINK_ERR": ISOLATE,
    "CONTACT_SUPPORT": ISOLATE,
}
# NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.   (older drivers: "Xid (0000:01:00): 13, ...")
XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<code>\d+),\s*(?P<text>.*)$")
PCIE_SPEED = re.compile(r"^(\d+(?:\.\d+)?)\s*GT/s")
COUNTERS = ("link_downed", "symbol_error")

# ---------------------------------------------------------------------------
# nvidia-smi: what a real host's driver reports about GPU memory and clocks
# ---------------------------------------------------------------------------
# Field names and meanings from nvidia-smi's own --help-query-gpu text, as printed by a 5xx driver and copied in
# XueSongTap/XueSongTap.github.io _posts/2024-01-04-nvidia-smi-more.md (read 2026-12-07 through a code index; its
# ecc.errors section agrees with the copy in netdata/netdata#10362): ecc.errors.uncorrected.{volatile,aggregate}.total
# ("Volatile error counters track the number of errors detected since the last driver load. Aggregate error counts
# persist indefinitely"), retired_pages.pending ("pending retirement on the next reboot"), and
# clocks_throttle_reasons.active, which newer drivers also call clocks_event_reasons.active ("Bitmask of active clock
# event reasons. See nvml.h"): the older spelling is asked for because both driver generations accept it.
# "[N/A]"/"[Not Supported]" in a field (nvidia-smi(1): "Any unsupported data is indicated by a N/A") reads as None.
SMI_GPU_FIELDS = (
    "pci.bus_id",
    "driver_version",
    "vbios_version",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.pending",
    "retired_pages.double_bit.count",
    "clocks_throttle_reasons.active",
)
# Row remapping (Ampere and newer) has a query of its own. UNVERIFIED against an NVIDIA page: the option
# --query-remapped-rows and these field names are as public health scripts call them (ten of them found through a
# code index on 2026-12-07, e.g. `nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,
# remapped_rows.failure --format=csv,noheader`), and whether pending/failure print 0/1 or No/Yes is not settled
# there, so both are read; their
# meaning is NVML's nvmlDeviceGetRemappedRows (https://docs.nvidia.com/deploy/nvml-api/, read 2026-12-07:
# "isPending indicates whether or not there are pending remappings. A reset will be required to actually remap the
# row. failureOccurred will be set if a row remapping ever failed in the past").
SMI_REMAP_FIELDS = ("gpu_bus_id", "remapped_rows.pending", "remapped_rows.failure", "remapped_rows.uncorrectable")
SMI_GPU_COMMAND = ("nvidia-smi", "--query-gpu=" + ",".join(SMI_GPU_FIELDS), "--format=csv,noheader")
SMI_REMAP_COMMAND = ("nvidia-smi", "--query-remapped-rows=" + ",".join(SMI_REMAP_FIELDS), "--format=csv,noheader")
# Bits of the clock-event bitmask that mean the GPU slowed itself for heat or power, from nvml.h's
# nvmlClocksEventReason* / nvmlClocksThrottleReason* constants
# (https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html; the values as quoted in
# RedHatInsights/insights-core PR #4353, read 2026-12-07). Idle, applications clocks, SW power cap, sync boost and
# display clocks are settings or load, not faults, and pass.
CLOCK_EVENT_FAULTS = {
    0x08: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
# gpufabric's thresholds (docs/health.md): no uncorrectable error since the driver loaded is allowed. The aggregate
# (lifetime) count is shown as evidence and not judged: a GPU whose errors were remapped or retired carries it for
# ever (leptonai/gpud PR #108: "as long as NVIDIA performs row remapping, we don't need to mark this unhealthy").
ECC_UNCORRECTED_VOLATILE_MAX = 0
# `nvidia-smi nvlink -s` (--status): per GPU a line "GPU <index>: <name> (UUID: <uuid>)", then one line per link,
# "Link <n>: <rate> GB/s" or "Link <n>: <inactive>". Real output quoted in Azure/azhpc-diagnostics#73 (V100,
# 2022-03-23: "Link 3: <inactive>") and NVIDIA/k8s-test-infra#371 (GB200, 18 links at 53.125 GB/s, 2026-06-11).
SMI_NVLINK_COMMAND = ("nvidia-smi", "nvlink", "-s")
NVLINK_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?)(?: \(UUID: (?P<uuid>[^)]*)\))?\s*$")
NVLINK_LINK_LINE = re.compile(r"^\s+Link (?P<link>\d+): (?P<value>.+?)\s*$")
NVLINK_RATE = re.compile(r"^(?P<rate>\d+(?:\.\d+)?) GB/s$")
# `systemctl show -p ActiveState --value UNIT` (systemctl(1), https://manpages.ubuntu.com/manpages/noble/man1/
# systemctl.1.html, read 2026-12-07): "active" runs; "activating"/"reloading" are on their way (unknown); anything
# else ("inactive", "failed", "deactivating") does not run.
SERVICE_TRANSIENT = ("activating", "reloading")
# What each host reports for the fleet's version-skew check (gpufabric health, docs/health.md).
VERSION_KEYS = ("driver", "vbios", "hca_firmware", "nccl")
# nccl.LIBRARY (module_utils/nccl.py), named here so the module ships no more than it needs.
NCCL_PACKAGE = "libnccl2"


def verdict(
    check: str,
    subject: str,
    status: str,
    message: str,
    action: str | None = None,
    evidence: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "check": check,
        "subject": subject,
        "status": status,
        "action": action if status == FAIL or action else None,
        "message": message,
        "evidence": evidence or {},
    }


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def _pcie_link(sysfs: hw_facts.Sysfs, address: str) -> dict[str, Any]:
    base = f"/sys/bus/pci/devices/{address}"
    return {
        "current_link_width": sysfs.integer(f"{base}/current_link_width", minimum=0),
        "max_link_width": sysfs.integer(f"{base}/max_link_width", minimum=0),
        "current_link_speed": sysfs.text(f"{base}/current_link_speed"),
        "max_link_speed": sysfs.text(f"{base}/max_link_speed"),
    }


def _port_counters(sysfs: hw_facts.Sysfs, device: str, port: int) -> dict[str, int | None]:
    """The port's error counters; absent ones are None (EFA devices keep other counters, in hw_counters)."""
    base = f"/sys/class/infiniband/{device}/ports/{port}/counters"
    return {name: sysfs.integer(f"{base}/{name}", required=False, minimum=0) for name in COUNTERS}


def read_host(root: str, hardware_profile: dict[str, Any]) -> dict[str, Any]:
    """What the checks need from the host below ``root``: hw_facts plus PCIe links and port counters.

    ``hardware_profile`` (the plan's ``hardware``) says which devices are the fabric's, so only theirs are read.
    Unreadable files become None and an ``unreadable`` entry, as in hw_facts.
    """
    facts = hw_facts.gather(root)
    sysfs = hw_facts.Sysfs(root)
    network = fabric_findings.gpu_network(facts, hardware_profile)
    links: dict[str, dict[str, Any]] = {}
    for gpu in facts["gpus"]:
        links[gpu["pci_address"]] = {"kind": "gpu", "name": gpu["pci_address"], **_pcie_link(sysfs, gpu["pci_address"])}
    counters: dict[str, dict[str, int | None]] = {}
    firmware: dict[str, str | None] = {}
    for item in network:
        device = item["rdma"] or item["netdev"]
        address = device.get("pci_address") if device else None
        if address and address not in links:
            links[address] = {"kind": "nic", "name": item["name"], **_pcie_link(sysfs, address)}
        if item["rdma"] is not None:
            # Linux's stable sysfs ABI, Documentation/ABI/stable/sysfs-class-infiniband: fw_ver, "(RO) Display
            # firmware version" (read 2026-12-07 through a code index).
            firmware[item["name"]] = sysfs.text(f"/sys/class/infiniband/{item['name']}/fw_ver", required=False)
            for port in item["rdma"].get("ports", []):
                counters[f"{item['name']}/{port['port']}"] = _port_counters(sysfs, item["name"], port["port"])
    return {
        "hardware": facts,
        "pci_bus_readable": sysfs.exists("/sys/bus/pci/devices"),
        "pcie_links": links,
        "port_counters": counters,
        "hca_firmware": firmware,
        # NCCL as the nccl role installs or adopts it: libnccl2's version in dpkg's database (None on RPM hosts).
        "nccl": (hw_facts.stack_packages(sysfs) or {}).get(NCCL_PACKAGE),
        "unreadable": facts["unreadable"] + sysfs.unreadable,
    }


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------


def check_gpus(reading: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, Any]]:
    """GPU count and model against the profile's ``gpu`` (count, model, pci_id)."""
    expected = profile["gpu"]
    if not reading.get("pci_bus_readable", True):
        message = "the PCI bus (/sys/bus/pci/devices) could not be read"
        return [verdict("gpu_count", "gpus", UNKNOWN, message), verdict("gpu_model", "gpus", UNKNOWN, message)]
    gpus = reading["hardware"].get("gpus", [])
    found = [gpu["pci_address"] for gpu in gpus]
    evidence = {"found": len(gpus), "expected": expected["count"], "pci_addresses": found}
    if len(gpus) == expected["count"]:
        out = [verdict("gpu_count", "gpus", PASS, f"{len(gpus)} GPUs, as the profile expects", evidence=evidence)]
    else:
        message = (
            f"found {len(gpus)} of {expected['count']} GPUs ({expected['model']}); a GPU off the bus comes back "
            "after a reboot or not at all (then isolate the host)"
        )
        out = [verdict("gpu_count", "gpus", FAIL, message, ACTIONS["gpu_count"], evidence)]
    want_id = expected.get("pci_id")
    for gpu in gpus:
        address = gpu["pci_address"]
        seen = {"pci_id": gpu.get("pci_id"), "model": gpu.get("model")}
        if not want_id:
            message = f"GPU {address} is {gpu.get('pci_id')}; the profile names no PCI id to compare it with"
            out.append(verdict("gpu_model", address, UNKNOWN, message, evidence=seen))
            continue
        ok = gpu.get("pci_id") == want_id
        want = f"{want_id} ({expected['model']})"
        if ok:
            out.append(verdict("gpu_model", address, PASS, f"GPU {address} is {want}", evidence=seen))
        else:
            message = f"GPU {address} is {gpu.get('pci_id')} ({gpu.get('model')}); the profile expects {want}"
            out.append(verdict("gpu_model", address, FAIL, message, ACTIONS["gpu_model"], {**seen, "expected": want}))
    return out


def _speed(value: str | None) -> float | None:
    match = PCIE_SPEED.match(value or "")
    return float(match.group(1)) if match else None


def check_pcie_links(reading: dict[str, Any]) -> list[dict[str, Any]]:
    """Each GPU and fabric NIC: the negotiated link against what the same device and its slot can do (max_*).

    Comparing with the device's own max_* keeps a device wired narrower by design from failing (aws-k8s-tester
    PR #806). A GPU's current speed below its max is ``unknown``, not ``fail``: NVIDIA documents that an idle
    GPU's current link generation and width "may be reduced when the GPU is not in use" (nvidia-smi), and
    generation is what drops in practice; width below max fails (see docs/health.md for that limit).
    """
    out = []
    for address, link in sorted(reading.get("pcie_links", {}).items()):
        what = f"{'GPU' if link['kind'] == 'gpu' else 'NIC ' + link['name']} {address}"
        evidence = {
            key: link[key] for key in ("current_link_width", "max_link_width", "current_link_speed", "max_link_speed")
        }
        width, max_width = link["current_link_width"], link["max_link_width"]
        speed, max_speed = _speed(link["current_link_speed"]), _speed(link["max_link_speed"])
        if None in (width, max_width, speed, max_speed) or not max_width:
            message = f"{what}: the PCIe link files could not be read or say Unknown"
            out.append(verdict("pcie_link", address, UNKNOWN, message, evidence=evidence))
            continue
        if width < max_width:
            message = f"{what} links at x{width}; it and its slot can do x{max_width}"
            out.append(verdict("pcie_link", address, FAIL, message, ACTIONS["pcie_link"], evidence))
        elif speed < max_speed and link["kind"] == "gpu":
            message = (
                f"{what} links at {link['current_link_speed']} of {link['max_link_speed']}: an idle GPU lowers its "
                "link generation, so only a reading under load can judge it"
            )
            out.append(verdict("pcie_link", address, UNKNOWN, message, evidence=evidence))
        elif speed < max_speed:
            message = f"{what} links at {link['current_link_speed']}; it and its slot can do {link['max_link_speed']}"
            out.append(verdict("pcie_link", address, FAIL, message, ACTIONS["pcie_link"], evidence))
        else:
            message = f"{what} links at x{width} {link['current_link_speed']}, its maximum"
            out.append(verdict("pcie_link", address, PASS, message, evidence=evidence))
    return out


def check_fabric_ports(reading: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, Any]]:
    """Every GPU-network port up at the profile's rate (``nics.gpu.speed_gbit_s``), and all of the NICs there.

    RDMA ports (InfiniBand, RoCE, EFA) by their ``state`` and ``rate``; NICs without an RDMA device by the
    netdev's ``operstate`` and ``speed``.
    """
    spec = profile["nics"]["gpu"]
    network = fabric_findings.gpu_network(reading["hardware"], profile)
    names = [item["name"] for item in network]
    count_evidence = {"found": names, "expected": spec["count"]}
    if len(network) < spec["count"]:
        message = f"found {len(network)} of {spec['count']} GPU-network NICs ({spec['kind']})"
        out = [verdict("fabric_count", "gpu_network", FAIL, message, ACTIONS["fabric_count"], count_evidence)]
    else:
        message = f"{len(network)} GPU-network NICs, as the profile expects"
        out = [verdict("fabric_count", "gpu_network", PASS, message, evidence=count_evidence)]
    want = spec.get("speed_gbit_s")
    for item in network:
        if item["rdma"] is None:
            out.append(_netdev_port(item["netdev"], want))
            continue
        for port in item["rdma"].get("ports", []):
            subject = f"{item['name']}/{port['port']}"
            evidence = {"state": port.get("state"), "rate": port.get("rate"), "expected_gbit_s": want}
            rate = port.get("rate_gbit_s")
            if port.get("state") is None:
                out.append(verdict("fabric_port", subject, UNKNOWN, f"{subject}: state unreadable", evidence=evidence))
            elif port["state"] != "ACTIVE":
                message = f"{subject} is {port['state']} ({port.get('phys_state')}); expected ACTIVE"
                out.append(verdict("fabric_port", subject, FAIL, message, ACTIONS["fabric_port"], evidence))
            elif want is None or rate is None:
                message = f"{subject} is ACTIVE; its rate cannot be judged (" + (
                    "the profile gives none)" if want is None else "rate unreadable)"
                )
                out.append(verdict("fabric_port", subject, UNKNOWN, message, evidence=evidence))
            elif rate < want:
                message = f"{subject} is ACTIVE at {rate:g} Gb/s; the profile expects {want:g} Gb/s"
                out.append(verdict("fabric_port", subject, FAIL, message, ACTIONS["fabric_port"], evidence))
            else:
                message = f"{subject} is ACTIVE at {rate:g} Gb/s"
                out.append(verdict("fabric_port", subject, PASS, message, evidence=evidence))
    return out


def _netdev_port(netdev: dict[str, Any], want: float | None) -> dict[str, Any]:
    """A GPU-network NIC without an RDMA device (gVNIC, plain Ethernet): operstate up, speed at the profile's."""
    subject = netdev["name"]
    speed = netdev.get("speed_mbps")
    evidence = {"operstate": netdev.get("operstate"), "speed_mbps": speed, "expected_gbit_s": want}
    if netdev.get("operstate") is None:
        return verdict("fabric_port", subject, UNKNOWN, f"{subject}: operstate unreadable", evidence=evidence)
    if netdev["operstate"] != "up":
        message = f"{subject} is {netdev['operstate']} (operstate); expected up"
        return verdict("fabric_port", subject, FAIL, message, ACTIONS["fabric_port"], evidence)
    if want is None or speed is None:
        reason = "the profile gives none" if want is None else "the driver reports none"
        return verdict(
            "fabric_port",
            subject,
            UNKNOWN,
            f"{subject} is up; its speed cannot be judged ({reason})",
            evidence=evidence,
        )
    if speed < want * 1000:
        message = f"{subject} is up at {speed / 1000:g} Gb/s; the profile expects {want:g} Gb/s"
        return verdict("fabric_port", subject, FAIL, message, ACTIONS["fabric_port"], evidence)
    return verdict("fabric_port", subject, PASS, f"{subject} is up at {speed / 1000:g} Gb/s", evidence=evidence)


def check_port_counters(
    reading: dict[str, Any], previous: dict[str, dict[str, int | None]] | None, allowed: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """link_downed and symbol_error of every fabric port against the previous reading: rising means a flap.

    ``previous`` is an earlier reading's ``port_counters``; None or missing a port: nothing to compare with, so
    ``unknown`` (the first run says so). ``allowed``: how much each counter may rise between readings (0 unless the
    caller says otherwise). A counter lower than before was reset (a reboot or driver reload): ``unknown``.
    """
    allowed = {name: 0 for name in COUNTERS} | (allowed or {})
    out = []
    for subject, now in sorted(reading.get("port_counters", {}).items()):
        before = (previous or {}).get(subject)
        for name in COUNTERS:
            value, last = now.get(name), (before or {}).get(name)
            evidence = {"previous": last, "current": value, "allowed_increase": allowed[name]}
            if value is None:
                message = f"{subject}: counters/{name} is absent or unreadable (EFA devices have none), so not judged"
                out.append(verdict(name, subject, UNKNOWN, message, evidence=evidence))
            elif last is None:
                message = f"{subject}: {name} reads {value}; no earlier reading to compare with (first run)"
                out.append(verdict(name, subject, UNKNOWN, message, evidence=evidence))
            elif value < last:
                message = f"{subject}: {name} fell from {last} to {value}: the counters were reset since"
                out.append(verdict(name, subject, UNKNOWN, message, evidence=evidence))
            elif value - last > allowed[name]:
                message = f"{subject}: {name} rose from {last} to {value} since the previous reading"
                out.append(verdict(name, subject, FAIL, message, ACTIONS[name], evidence))
            else:
                message = f"{subject}: {name} {value}, {value - last} more than the previous reading"
                out.append(verdict(name, subject, PASS, message, evidence=evidence))
    return out


def parse_xids(text: str) -> list[dict[str, Any]]:
    """Xid events in kernel-log text, one entry per (GPU, code) with the count and the first line."""
    events: dict[tuple[str, int], dict[str, Any]] = {}
    for line in text.splitlines():
        match = XID_LINE.search(line)
        if not match:
            continue
        key = (match.group("pci").lower(), int(match.group("code")))
        if key in events:
            events[key]["count"] += 1
        else:
            events[key] = {"pci": key[0], "code": key[1], "count": 1, "line": line.strip()}
    return [events[key] for key in sorted(events)]


def check_xids(kernel_log: str | None, source: str = "kernel log") -> list[dict[str, Any]]:
    """One verdict per (GPU, Xid code) in the kernel log since boot; ``pass`` when there are none."""
    if kernel_log is None:
        return [verdict("xid", "kernel_log", UNKNOWN, f"the {source} could not be read")]
    events = parse_xids(kernel_log)
    if not events:
        return [verdict("xid", "kernel_log", PASS, f"no Xid events in the {source}")]
    out = []
    for event in events:
        subject = f"{event['pci']}/xid{event['code']}"
        entry = XID_CATALOG.get(event["code"])
        evidence = {"code": event["code"], "count": event["count"], "line": event["line"]}
        if entry is None:
            message = (
                f"Xid {event['code']} on {event['pci']} ({event['count']}x) is not in gpufabric's table "
                "(UNVERIFIED): look it up in NVIDIA's Xid catalog"
            )
            out.append(verdict("xid", subject, UNKNOWN, message, MONITOR, {**evidence, "source": "UNVERIFIED"}))
            continue
        action = BUCKET_ACTIONS[entry["bucket"]]
        message = (
            f"Xid {event['code']} {entry['mnemonic']} on {event['pci']} ({event['count']}x): NVIDIA's catalog says "
            f"{entry['bucket']}"
        )
        evidence |= {"mnemonic": entry["mnemonic"], "bucket": entry["bucket"], "source": XID_CATALOG_SOURCE}
        if "note" in entry:
            evidence["note"] = entry["note"]
        out.append(verdict("xid", subject, FAIL, message, action, evidence))
    return out


def verdicts(
    reading: dict[str, Any],
    profile: dict[str, Any],
    kernel_log: str | None,
    previous_counters: dict[str, dict[str, int | None]] | None = None,
    allowed_increase: dict[str, int] | None = None,
    smi: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every check's verdicts for one host; ``profile`` is its plan's ``hardware``.

    ``smi``: what nvidia-smi and systemd answered, {"gpus": rows of SMI_GPU_FIELDS or None, "remaps": rows of
    SMI_REMAP_FIELDS or None, "nvlink": parse_nvlink_status's list or None, "nvlink_expected": whether the profile's
    GPUs have NVLink, "services": {unit: ActiveState or None}, "source": where from}; None (no nvidia-smi) makes the
    memory and clock checks (and NVLink where expected) ``unknown``.
    """
    smi = smi or {}
    source = smi.get("source") or "nvidia-smi"
    return (
        check_gpus(reading, profile)
        + check_pcie_links(reading)
        + check_fabric_ports(reading, profile)
        + check_port_counters(reading, previous_counters, allowed_increase)
        + check_xids(kernel_log)
        + check_gpu_memory(smi.get("gpus"), smi.get("remaps"), source)
        + check_clock_events(smi.get("gpus"), source)
        + check_nvlink(smi.get("nvlink"), bool(smi.get("nvlink_expected")), int(profile["gpu"]["count"]))
        + check_services(smi.get("services") or {})
    )


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The host's verdict: ``fail`` if any check failed, else ``unknown`` if any could not answer, else ``pass``;
    with the strongest action asked for and the count of each status."""
    counts = {status: sum(1 for item in results if item["status"] == status) for status in (PASS, FAIL, UNKNOWN)}
    status = FAIL if counts[FAIL] else (UNKNOWN if counts[UNKNOWN] else PASS)
    actions = [item["action"] for item in results if item["status"] == FAIL and item["action"]]
    action = max(actions, key=ACTION_ORDER.index) if actions else None
    return {"status": status, "action": action, "counts": counts}


# ---------------------------------------------------------------------------
# GPU memory and clocks (nvidia-smi)
# ---------------------------------------------------------------------------

_NOT_AVAILABLE = ("", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]")


def smi_value(text: str | None) -> str | None:
    """A CSV field as nvidia-smi printed it, or None where it says N/A, Not Supported or nothing."""
    value = (text or "").strip()
    return None if value.lower() in _NOT_AVAILABLE else value


def smi_int(text: str | None) -> int | None:
    value = smi_value(text)
    try:
        return int(value, 0) if value is not None else None
    except ValueError:
        return None


def smi_flag(text: str | None) -> bool | None:
    value = (smi_value(text) or "").lower()
    if value in ("yes", "1", "true"):
        return True
    if value in ("no", "0", "false"):
        return False
    return None


def smi_bus_id(text: str | None) -> str | None:
    """nvidia-smi's "00000000:1C:00.0" (an 8-digit domain) as sysfs names it: "0000:1c:00.0"."""
    value = (smi_value(text) or "").lower()
    match = re.match(r"^(?:[0-9a-f]{4})?([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])$", value)
    return match.group(1) if match else None


def parse_smi_csv(text: str | None, fields: tuple[str, ...]) -> list[dict[str, str]] | None:
    """``--format=csv,noheader`` output: one dict per GPU line, by field name; None when there is no output.

    A line with another number of columns than ``fields`` is left out (a driver message, not a GPU).
    """
    if text is None:
        return None
    rows = []
    for line in text.splitlines():
        columns = [column.strip() for column in line.split(",")]
        if len(columns) == len(fields):
            rows.append({field: columns[index] for index, field in enumerate(fields)})
    return rows


def check_gpu_memory(
    gpus: list[dict[str, str]] | None, remaps: list[dict[str, str]] | None, source: str = "nvidia-smi"
) -> list[dict[str, Any]]:
    """Per GPU: uncorrectable ECC errors since the driver loaded, row remaps pending or failed, pages pending
    retirement. ``gpus`` are rows of SMI_GPU_FIELDS, ``remaps`` of SMI_REMAP_FIELDS; None: no answer (``unknown``)."""
    if gpus is None:
        return [verdict("gpu_memory", "gpus", UNKNOWN, f"GPU memory not judged: no answer from nvidia-smi ({source})")]
    if not gpus:
        return [verdict("gpu_memory", "gpus", UNKNOWN, f"GPU memory not judged: nvidia-smi listed no GPU ({source})")]
    by_bus = {smi_bus_id(row.get("gpu_bus_id")): row for row in remaps or []}
    out = []
    for row in gpus:
        bus = smi_bus_id(row.get("pci.bus_id")) or row.get("pci.bus_id") or "?"
        volatile = smi_int(row.get("ecc.errors.uncorrected.volatile.total"))
        aggregate = smi_int(row.get("ecc.errors.uncorrected.aggregate.total"))
        evidence = {"uncorrected_volatile": volatile, "uncorrected_aggregate": aggregate}
        if volatile is None:
            message = f"GPU {bus}: no uncorrectable ECC count (ECC off or not reported)"
            out.append(verdict("ecc_uncorrected", bus, UNKNOWN, message, evidence=evidence))
        elif volatile > ECC_UNCORRECTED_VOLATILE_MAX:
            message = f"GPU {bus}: {volatile} uncorrectable ECC errors since the driver loaded"
            out.append(verdict("ecc_uncorrected", bus, FAIL, message, ACTIONS["ecc_uncorrected"], evidence))
        else:
            message = f"GPU {bus}: no uncorrectable ECC error since the driver loaded ({aggregate} in its life)"
            out.append(verdict("ecc_uncorrected", bus, PASS, message, evidence=evidence))
        out.extend(_row_remaps(bus, by_bus.get(bus), remaps is not None))
        out.extend(_retired_pages(bus, row))
    return out


def _row_remaps(bus: str, row: dict[str, str] | None, asked: bool) -> list[dict[str, Any]]:
    if row is None:
        reason = "no row-remapping answer for it" if asked else "the row-remapping query gave no answer"
        return [verdict("row_remap", bus, UNKNOWN, f"GPU {bus}: {reason} (older than Ampere, or not asked)")]
    pending, failure = smi_flag(row.get("remapped_rows.pending")), smi_flag(row.get("remapped_rows.failure"))
    evidence = {
        "pending": pending,
        "failure": failure,
        "uncorrectable": smi_int(row.get("remapped_rows.uncorrectable")),
    }
    if failure:
        message = f"GPU {bus}: a row remap failed (NVIDIA's RMA criterion): take it out of service"
        return [verdict("row_remap_failure", bus, FAIL, message, ACTIONS["row_remap_failure"], evidence)]
    if pending:
        message = f"GPU {bus}: a row remap is pending; it takes effect at the next GPU reset"
        return [verdict("row_remap_pending", bus, FAIL, message, ACTIONS["row_remap_pending"], evidence)]
    if pending is None or failure is None:
        return [verdict("row_remap", bus, UNKNOWN, f"GPU {bus}: row remapping not reported", evidence=evidence)]
    return [verdict("row_remap", bus, PASS, f"GPU {bus}: no row remap pending or failed", evidence=evidence)]


def _retired_pages(bus: str, row: dict[str, str]) -> list[dict[str, Any]]:
    """Page retirement (GPUs before Ampere; newer ones remap rows and say N/A here, which is no verdict)."""
    pending = smi_flag(row.get("retired_pages.pending"))
    if pending is None:
        return []
    evidence = {"pending": pending, "double_bit": smi_int(row.get("retired_pages.double_bit.count"))}
    if pending:
        message = f"GPU {bus}: memory pages are pending retirement; they retire at the next reboot"
        return [verdict("retired_pages_pending", bus, FAIL, message, ACTIONS["retired_pages_pending"], evidence)]
    return [verdict("retired_pages", bus, PASS, f"GPU {bus}: no page pending retirement", evidence=evidence)]


def check_clock_events(gpus: list[dict[str, str]] | None, source: str = "nvidia-smi") -> list[dict[str, Any]]:
    """Per GPU: the active clock-event (throttle) reasons; a thermal or power slowdown fails (``monitor``)."""
    if not gpus:
        return [
            verdict("clock_events", "gpus", UNKNOWN, f"clock events not judged: no answer from nvidia-smi ({source})")
        ]
    out = []
    for row in gpus:
        bus = smi_bus_id(row.get("pci.bus_id")) or row.get("pci.bus_id") or "?"
        mask = smi_int(row.get("clocks_throttle_reasons.active"))
        if mask is None:
            out.append(verdict("clock_events", bus, UNKNOWN, f"GPU {bus}: clock-event reasons not reported"))
            continue
        active = [name for bit, name in sorted(CLOCK_EVENT_FAULTS.items()) if mask & bit]
        evidence = {"active_mask": f"0x{mask:016x}", "faults": active}
        if active:
            message = f"GPU {bus} slows its clocks: {', '.join(active)}"
            out.append(verdict("clock_events", bus, FAIL, message, ACTIONS["clock_events"], evidence))
        else:
            out.append(
                verdict("clock_events", bus, PASS, f"GPU {bus}: no thermal or power slowdown", evidence=evidence)
            )
    return out


def host_versions(gpus: list[dict[str, str]] | None, reading: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Driver and VBIOS versions nvidia-smi reported, the GPU-network HCAs' firmware and libnccl2's version, each
    distinct and sorted (gpufabric health compares them across the fleet: VERSION_KEYS)."""
    out: dict[str, list[str]] = {"driver": [], "vbios": [], "hca_firmware": [], "nccl": []}
    for value in ((reading or {}).get("hca_firmware") or {}).values():
        if value and value not in out["hca_firmware"]:
            out["hca_firmware"].append(value)
    if (reading or {}).get("nccl"):
        out["nccl"].append(str((reading or {})["nccl"]))
    for row in gpus or []:
        for key, field in (("driver", "driver_version"), ("vbios", "vbios_version")):
            value = smi_value(row.get(field))
            if value and value not in out[key]:
                out[key].append(value)
    return {key: sorted(values) for key, values in out.items()}


# ---------------------------------------------------------------------------
# NVLink and the services it needs
# ---------------------------------------------------------------------------


def parse_nvlink_status(text: str | None) -> list[dict[str, Any]] | None:
    """``nvidia-smi nvlink -s`` as [{"index", "name", "links": {n: GB/s or None when inactive}}]; None: no output."""
    if text is None:
        return None
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        gpu = NVLINK_GPU_LINE.match(line)
        if gpu:
            gpus.append({"index": int(gpu.group("index")), "name": gpu.group("name"), "links": {}})
            continue
        link = NVLINK_LINK_LINE.match(line)
        if link and gpus:
            rate = NVLINK_RATE.match(link.group("value"))
            gpus[-1]["links"][int(link.group("link"))] = float(rate.group("rate")) if rate else None
    return gpus


def check_nvlink(status: list[dict[str, Any]] | None, expected: bool, gpu_count: int) -> list[dict[str, Any]]:
    """Where the profile's GPUs have NVLink (``expected``): every GPU listed, every link it lists up, and as many
    links up as the host's other GPUs (the most common count). No verdict where the profile has no NVLink."""
    if not expected:
        return []
    if status is None:
        return [verdict("nvlink", "gpus", UNKNOWN, "nvidia-smi nvlink -s could not be asked (NVLink not judged)")]
    out = []
    if len(status) != gpu_count:
        message = f"nvidia-smi nvlink -s lists {len(status)} GPUs; the profile has {gpu_count}"
        out.append(verdict("nvlink", "gpus", FAIL, message, ACTIONS["nvlink"], {"listed": len(status)}))
    counts = [sum(1 for rate in gpu["links"].values() if rate is not None) for gpu in status]
    usual = max(sorted(set(counts)), key=counts.count) if counts else 0
    for position, gpu in enumerate(status):
        up = counts[position]
        subject = f"gpu{gpu['index']}"
        down = sorted(link for link, rate in gpu["links"].items() if rate is None)
        evidence = {"links": len(gpu["links"]), "up": up, "inactive": down, "host_usual_up": usual}
        if not gpu["links"]:
            message = f"GPU {gpu['index']} ({gpu['name']}) lists no NVLink link"
            out.append(verdict("nvlink", subject, FAIL, message, ACTIONS["nvlink"], evidence))
        elif down:
            listed = len(gpu["links"])
            message = f"GPU {gpu['index']}: NVLink {', '.join(map(str, down))} inactive ({up} of {listed} up)"
            out.append(verdict("nvlink", subject, FAIL, message, ACTIONS["nvlink"], evidence))
        elif up < usual:
            message = f"GPU {gpu['index']}: {up} NVLink links up; the host's other GPUs have {usual}"
            out.append(verdict("nvlink", subject, FAIL, message, ACTIONS["nvlink"], evidence))
        else:
            out.append(verdict("nvlink", subject, PASS, f"GPU {gpu['index']}: {up} NVLink links up", evidence=evidence))
    return out


def check_services(states: dict[str, str | None]) -> list[dict[str, Any]]:
    """Each service the plan needs (fabric manager, IMEX) by its systemd ActiveState; None: could not be asked."""
    out = []
    for unit, state in sorted(states.items()):
        evidence = {"active_state": state}
        if state is None:
            out.append(verdict("service", unit, UNKNOWN, f"{unit}: systemctl could not be asked", evidence=evidence))
        elif state == "active":
            out.append(verdict("service", unit, PASS, f"{unit} is active", evidence=evidence))
        elif state in SERVICE_TRANSIENT:
            out.append(verdict("service", unit, UNKNOWN, f"{unit} is {state}", evidence=evidence))
        else:
            message = f"{unit} is {state or 'unknown to systemd'}; the plan needs it running"
            out.append(verdict("service", unit, FAIL, message, ACTIONS["service"], evidence))
    return out
