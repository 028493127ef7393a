# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter

sriov = module_utils("sriov")
sriov_firmware = module_utils("sriov_firmware")
sriov_role = module_utils("sriov_role")


def _mapping(value, what):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{what} expects a dictionary, got {type(value).__name__}")
    return value


def firmware_plan(queries: list[dict[str, Any]], sriov_plan: dict[str, Any]) -> dict[str, Any]:
    """Per physical function: what ``mstconfig set`` must change and whether the VFs must wait for a reboot.

    ``queries`` are the registered results of ``mstconfig -e -d PCI q`` looped over ``sriov_plan.pfs``.
    """
    devices = []
    errors = []
    waiting = []
    for result in queries:
        pf = result.get("item") or {}
        device = pf.get("pf", "?")
        if result.get("rc", 0) != 0 or result.get("failed"):
            message = (result.get("stderr") or result.get("msg") or result.get("stdout") or "").strip()
            errors.append(f"mstconfig -e -d {device} q failed (rc {result.get('rc')}): {message}")
            continue
        try:
            query = sriov_firmware.parse_query(result.get("stdout", ""), device)
        except sriov_firmware.FirmwareError as exc:
            errors.append(str(exc))
            continue
        entry = sriov_firmware.plan(device, query, sriov_plan.get("firmware") or {})
        errors.extend(entry["errors"])
        total = pf.get("totalvfs")
        # VFs the running firmware cannot carve yet are created by the boot unit after the reboot.
        if entry["reboot_required"] and (total is None or total < sriov_plan.get("num_vfs", 0)):
            waiting.append(device)
        devices.append(entry)
    return {
        "devices": devices,
        "report": [
            f"{entry['device']}: {', '.join(entry['pending'] or entry['differences'])}"
            for entry in devices
            if entry["reboot_required"]
        ],
        "drift": [
            f"{entry['device']}: firmware {difference}"
            for entry in devices
            for difference in entry["differences"] + entry["pending"]
        ],
        "waiting": waiting,
        "reboot_required": any(entry["reboot_required"] for entry in devices),
        "errors": errors,
    }


def address_conflicts(results: list[dict[str, Any]]) -> list[str]:
    """The same MAC or GUID on two VFs, also of different physical functions (module results in check mode)."""
    lists = {}
    for result in results:
        pf = (result.get("pf") or {}).get("pci_address") or (result.get("item") or {}).get("pf", "?")
        lists[pf] = (result.get("after") or {}).get("vfs") or []
    return [
        f"two VFs would get one address: {line}; accepted: one address per VF across all physical functions"
        for line in sriov.duplicate_addresses(lists)
    ]


def drift(vf_results: list[dict[str, Any]]) -> list[str]:
    """The module's check-mode predictions as differences: VF count lines as they are, per-VF settings counted.

    A fresh host would otherwise list every GUID of every VF; one line per physical function names the first.
    """
    found = []
    for result in vf_results:
        actions = result.get("actions") or []
        found.extend(action for action in actions if ": sriov_numvfs " in action)
        settings = [action for action in actions if ": sriov_numvfs " not in action]
        if settings:
            pf, _sep, first = settings[0].partition(": ")
            more = f" and {len(settings) - 1} more" if len(settings) > 1 else ""
            found.append(f"{pf}: {first}{more}")
    return found


def sriov_firmware_plan(queries, sriov_plan_):
    return firmware_plan(list(queries), _mapping(sriov_plan_, "sriov_firmware_plan plan"))


def sriov_address_conflicts(results):
    return address_conflicts(list(results))


def sriov_drift(vf_results):
    return drift(list(vf_results))


class FilterModule:
    def filters(self):
        return {
            "sriov_plan": role_plan_filter("sriov", sriov_role),
            "sriov_firmware_plan": sriov_firmware_plan,
            "sriov_address_conflicts": sriov_address_conflicts,
            "sriov_drift": sriov_drift,
        }
