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
    for item in network:
        device = item["rdma"] or item["netdev"]
        address = device.get("pci_address") if device else None
        if address and address not in links:
            links[address] = {"kind": "nic", "name": item["name"], **_pcie_link(sysfs, address)}
        if item["rdma"] is not None:
            for port in item["rdma"].get("ports", []):
                counters[f"{item['name']}/{port['port']}"] = _port_counters(sysfs, item["name"], port["port"])
    return {
        "hardware": facts,
        "pci_bus_readable": sysfs.exists("/sys/bus/pci/devices"),
        "pcie_links": links,
        "port_counters": counters,
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
) -> list[dict[str, Any]]:
    """Every check's verdicts for one host; ``profile`` is its plan's ``hardware``."""
    return (
        check_gpus(reading, profile)
        + check_pcie_links(reading)
        + check_fabric_ports(reading, profile)
        + check_port_counters(reading, previous_counters, allowed_increase)
        + check_xids(kernel_log)
    )


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The host's verdict: ``fail`` if any check failed, else ``unknown`` if any could not answer, else ``pass``;
    with the strongest action asked for and the count of each status."""
    counts = {status: sum(1 for item in results if item["status"] == status) for status in (PASS, FAIL, UNKNOWN)}
    status = FAIL if counts[FAIL] else (UNKNOWN if counts[UNKNOWN] else PASS)
    actions = [item["action"] for item in results if item["status"] == FAIL and item["action"]]
    action = max(actions, key=ACTION_ORDER.index) if actions else None
    return {"status": status, "action": action, "counts": counts}
