# SPDX-License-Identifier: Apache-2.0
"""Bare-metal PCIe and CPU tuning for the host_tuning role: what it manages, and the ConnectX firmware read.

Five settings, each opt-in: a role variable (``host_tuning_<name>``) gives the value; when it is empty (the default)
the host's plan does (``gpufabric_plan.host_tuning``, the catalog profile's ``host_tuning:`` section); when neither
names one, or the variable says ``unmanaged``, the role leaves the setting alone. The role calls ``plan()`` in one
task (``host_tuning__settings | gpufabric.cluster.host_tuning_plan(plan=gpufabric_plan, facts=ansible_facts)``).

- acs: PCIe ACS off on the bridges above the GPUs and ConnectX NICs, at every boot (NCCL troubleshooting guide:
  "If PCI switches have ACS enabled, it needs to be disabled"; it comes back at every boot).
- iommu: passthrough on the kernel command line, ``iommu=pt`` on x86_64 (NVIDIA's H100 TuneD profile) and
  ``iommu.passthrough=1`` on aarch64 (NVIDIA's GB200 TuneD profile; kernel-parameters ``iommu.passthrough=``).
- nic_pci_write_ordering: ConnectX firmware ``PCI_WR_ORDERING`` through mstconfig (mstflint): ``per_mkey`` (0, the
  firmware default, NCCL asks for relaxed ordering per memory region: NVIDIA/nccl#531) or ``force_relax`` (1).
- cpu_governor: the cpufreq governor of every CPU (NVIDIA's base TuneD profile: ``governor=performance``).
- irqbalance: the service enabled or disabled (Azure's GB200 images disable it).

``write_ordering`` reads ``mstconfig -d <pci> -e q`` (Default, Current and Next Boot columns) with the sriov role's
parser (plugins/module_utils/sriov_firmware.py, which documents mstflint's layout). Stdlib only: the role's filters
import it on the controller.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.module_utils import sriov_firmware

SETTINGS = ("acs", "iommu", "nic_pci_write_ordering", "cpu_governor", "irqbalance")
UNMANAGED = "unmanaged"
# The values each setting accepts; cpu_governor takes any governor name (the host says which it has).
CHOICES = {
    "acs": ("disabled",),
    "iommu": ("passthrough",),
    "nic_pci_write_ordering": ("per_mkey", "force_relax"),
    "irqbalance": ("enabled", "disabled"),
}
GOVERNOR = re.compile(r"^[a-z0-9_]+$")
# The kernel parameter that puts the IOMMU in passthrough, per architecture (ansible_facts.architecture).
IOMMU_PARAMETERS = {"x86_64": "iommu=pt", "aarch64": "iommu.passthrough=1"}
# PCI_WR_ORDERING's values in the firmware (mstflint mlxconfig_host.db): per_mkey=0x0, force_relax=0x1.
WRITE_ORDERING = {"per_mkey": 0, "force_relax": 1}

# What the role installs: one script with subcommands (ACS status/apply, the ConnectX functions, the governor),
# and a oneshot unit per setting that must be applied again at every boot.
SCRIPT = "/usr/local/sbin/gpufabric-pcie-acs"
UNIT_DIR = "/etc/systemd/system"
ACS_UNIT = "gpufabric-pcie-acs.service"
GOVERNOR_UNIT = "gpufabric-cpu-governor.service"
# update-grub reads /etc/default/grub, then /etc/default/grub.d/*.cfg in lexical order.
GRUB_DROPIN_DIR = "/etc/default/grub.d"


def _accepted(name: str) -> str:
    if name == "cpu_governor":
        return "'' (the profile's), unmanaged, or a cpufreq governor name (a-z, 0-9, _) such as performance"
    return "'' (the profile's), " + ", ".join(CHOICES[name] + (UNMANAGED,))


def _value_error(name: str, value: Any, where: str, accepted: str) -> str | None:
    """Why ``value`` is not a value of setting ``name``, or None."""
    if isinstance(value, str):
        ok = GOVERNOR.match(value) if name == "cpu_governor" else value in CHOICES[name]
        if ok:
            return None
    return f"{where} {value!r} is not accepted; accepted: {accepted}"


def _setting(name: str, settings: dict[str, Any], section: dict[str, Any], profile: str) -> dict[str, Any]:
    """One setting's value and where it comes from; ``error`` names the bad value and what is accepted."""
    variable = f"host_tuning_{name}"
    value = settings.get(name)
    value = "" if value is None else value
    if value == UNMANAGED:
        return {"value": "", "source": f"{variable}: unmanaged", "error": None}
    if value != "":
        error = _value_error(name, value, variable, _accepted(name))
        return {"value": value if error is None else "", "source": variable, "error": error}
    if section.get(name) is None:
        return {"value": "", "source": f"left alone: neither {variable} nor {profile} sets it", "error": None}
    value = section[name]
    accepted = "a cpufreq governor name such as performance" if name == "cpu_governor" else ", ".join(CHOICES[name])
    error = _value_error(name, value, f"{profile}'s host_tuning.{name}", accepted)
    return {"value": value if error is None else "", "source": profile, "error": error}


def _path_errors(settings: dict[str, Any]) -> list[str]:
    errors = []
    hw_root = settings.get("hw_root")
    # The boot units name its sysfs tree on their ExecStart line: no blanks.
    if not isinstance(hw_root, str) or not re.fullmatch(r"/\S*", hw_root):
        errors.append(
            f"host_tuning_hw_root {hw_root!r} is not accepted; accepted: an absolute path without blanks, / on a host"
        )
    dropin = settings.get("grub_dropin")
    if not (
        isinstance(dropin, str)
        and posixpath.dirname(dropin) == GRUB_DROPIN_DIR
        and dropin.endswith(".cfg")
        and len(posixpath.basename(dropin)) > len(".cfg")
    ):
        errors.append(
            f"host_tuning_grub_dropin {dropin!r} is not accepted; accepted: {GRUB_DROPIN_DIR}/<name>.cfg "
            "(update-grub reads only the *.cfg files there), such as "
            f"{GRUB_DROPIN_DIR}/99-gpufabric-host-tuning.cfg"
        )
    return errors


def _sysfs_root(hw_root: str) -> str:
    """The sysfs tree the role and its boot units read: /sys on a host, <root>/sys in a SIMULATED tree."""
    return hw_root.rstrip("/") + "/sys"


def plan(settings: dict[str, Any], host_plan: dict[str, Any] | None, facts: dict[str, Any]) -> dict[str, Any]:
    """The settings the role manages on this host, from its variables (``settings``: the role's variables without
    the ``host_tuning_`` prefix), the host's plan (its ``host_tuning`` section; None or absent: no profile section)
    and facts (``architecture``, for the IOMMU parameter).

    Returns ``errors`` (one per bad value, naming the variable, the value and what is accepted), ``settings``
    (per setting: ``value``, '' when unmanaged; ``source``; the ``packages``, ``files`` and ``units`` it needs),
    ``iommu_parameter``, ``packages``, ``sysfs_root`` (the sysfs tree under ``hw_root``; '' on errors), the fixed
    paths (``script``, ``unit_dir``, ``acs_unit``, ``governor_unit``, ``grub_dropin``) and ``profile_source`` (the
    catalog's basis for the profile's values).
    """
    host_plan = host_plan or {}
    section = host_plan.get("host_tuning") or {}
    profile = f"profile {host_plan['profile']}" if host_plan.get("profile") else "the host's profile"
    errors = _path_errors(settings)
    result: dict[str, Any] = {}
    for name in SETTINGS:
        entry = _setting(name, settings, section, profile)
        error = entry.pop("error")
        if error:
            errors.append(error)
        result[name] = entry

    iommu_parameter = ""
    if result["iommu"]["value"]:
        architecture = str(facts.get("architecture") or "")
        iommu_parameter = IOMMU_PARAMETERS.get(architecture, "")
        if not iommu_parameter:
            errors.append(
                f"{result['iommu']['source']} asks for IOMMU passthrough, but this host's architecture "
                f"{architecture!r} has no parameter for it here; accepted: "
                + ", ".join(f"{arch} ({parameter})" for arch, parameter in IOMMU_PARAMETERS.items())
                + "; or host_tuning_iommu: unmanaged"
            )

    # What each setting installs, writes and enables (the drift declaration sums these over the managed settings).
    needs = {
        "acs": (["pciutils"], [SCRIPT, f"{UNIT_DIR}/{ACS_UNIT}"], [ACS_UNIT]),
        "iommu": ([], [settings.get("grub_dropin")], []),
        "nic_pci_write_ordering": (["mstflint"], [], []),
        "cpu_governor": ([], [SCRIPT, f"{UNIT_DIR}/{GOVERNOR_UNIT}"], [GOVERNOR_UNIT]),
        # Disabled irqbalance is stopped and disabled where it is installed, never removed.
        "irqbalance": (["irqbalance"], [], ["irqbalance.service"]),
    }
    for name, (packages, files, units) in needs.items():
        managed = bool(result[name]["value"]) and not (name == "irqbalance" and result[name]["value"] == "disabled")
        result[name].update(
            packages=packages if managed else [], files=files if managed else [], units=units if managed else []
        )

    return {
        "errors": errors,
        "settings": result,
        "iommu_parameter": iommu_parameter,
        "packages": sorted({package for entry in result.values() for package in entry["packages"]}),
        "script": SCRIPT,
        "unit_dir": UNIT_DIR,
        "acs_unit": ACS_UNIT,
        "governor_unit": GOVERNOR_UNIT,
        "grub_dropin": settings.get("grub_dropin"),
        "sysfs_root": _sysfs_root(settings.get("hw_root")) if not errors else "",
        "profile_source": str(section.get("source") or ""),
    }


# ---------------------------------------------------------------- mstconfig (mstflint)

# The role queries every function in one task (one round trip, not one per NIC): each query's output, stderr
# included, between a line "### <device>" and a line "### rc <exit status>".
SECTION = re.compile(r"^### (?P<device>\S+)\n(?P<output>.*?)^### rc (?P<rc>\d+)$", re.M | re.S)


def split_queries(text: str) -> list[dict[str, Any]]:
    """The role's query output, per device: {device, rc, output}."""
    return [
        {"device": match["device"], "rc": int(match["rc"]), "output": match["output"]}
        for match in SECTION.finditer(text)
    ]


def write_ordering_plan(text: str, wanted: str) -> dict[str, Any]:
    """Every queried function compared with ``wanted``: {devices, reboot_required (one reason per device whose
    running value differs), errors (a query that failed or printed no table)}."""
    devices, errors = [], []
    for query in split_queries(text):
        if query["rc"] != 0:
            errors.append(f"mstconfig -d {query['device']} -e q exited {query['rc']}: {query['output'].strip()}")
            continue
        compared = write_ordering(query["device"], query["output"], wanted)
        if compared["error"]:
            errors.append(compared["error"])
        else:
            devices.append(compared)
    return {
        "devices": devices,
        "reboot_required": [device["reboot"] for device in devices if device["reboot"]],
        "errors": errors,
    }


def write_ordering(device: str, text: str, wanted: str) -> dict[str, Any]:
    """Compare one ConnectX function's ``mstconfig -d <pci> -e q`` output with the wanted PCI_WR_ORDERING.

    Returns {device, shown (Next Boot as the firmware prints it), hidden, set_args (after ``set``; empty when Next
    Boot matches), reboot (why a reboot or mstfwreset is needed; '' when the running value is the wanted one),
    error}. The firmware lists PCI_WR_ORDERING only while ADVANCED_PCI_SETTINGS is true (mstflint
    mlxconfig_host.db: "show this setting only when NV_PCI_CONF.advanced_pci_settings is true"); hidden, it is at
    its default per_mkey(0).
    """
    result = {"device": device, "shown": "", "hidden": False, "set_args": [], "reboot": "", "error": ""}
    number = WRITE_ORDERING[wanted]
    try:
        entry = sriov_firmware.parse_query(text, device, keys=("PCI_WR_ORDERING",)).get("PCI_WR_ORDERING")
    except sriov_firmware.FirmwareError as problem:
        result["error"] = str(problem)
        return result
    if entry is None:
        result.update(shown="per_mkey(0) (hidden, the firmware default)", hidden=True)
        next_boot, current = 0, 0
    else:
        result["shown"] = entry["next"]["text"]
        next_boot = entry["next"]["number"]
        current = entry["current"]["number"] if entry["current"] else None
        if next_boot is None:
            result["error"] = f"mstconfig -d {device}: PCI_WR_ORDERING {entry['next']['text']!r} is not a value it has"
            return result
    if next_boot != number:
        # Hidden means ADVANCED_PCI_SETTINGS is off; showing the setting and setting it in one command is
        # UNVERIFIED (no source shows both in one `set`).
        result["set_args"] = (["ADVANCED_PCI_SETTINGS=1"] if result["hidden"] else []) + [f"PCI_WR_ORDERING={wanted}"]
    # Firmware settings apply at the next reboot (mstconfig: "Please reboot machine to load new configurations."),
    # or after mstfwreset. Without -e the running value is unknown: only a set is known to need the reboot.
    running = current if current is not None else (None if result["set_args"] else number)
    if running != number:
        if result["hidden"]:
            now = "per_mkey(0)"
        else:
            now = entry["current"]["text"] if entry and entry["current"] else "unknown"
        result["reboot"] = f"{device}: PCI_WR_ORDERING {now} now, {wanted} after a reboot (or mstfwreset)"
    return result
