# SPDX-License-Identifier: Apache-2.0
"""ConnectX firmware settings for SR-IOV through mstconfig (mstflint): read the query, plan the set.

The sriov role runs ``mstconfig -e -d <pci> q`` on the host and hands the text here; this module parses it and
says which of SRIOV_EN, NUM_OF_VFS and LINK_TYPE_P1/P2 differ, the ``mstconfig -y -d <pci> set`` arguments that
fix them, and whether a reboot is needed. Firmware settings take effect only after a reboot (or firmware reset):
the role never reboots, it reports.

Query format (``-e``: Default, Current and Next Boot columns, a ``*`` in front of lines whose next value differs),
as sriov-network-operator reads it (k8snetworkplumbingwg/sriov-network-operator pkg/vendors/mellanox/mellanox.go,
``MstConfigReadData`` runs ``mstconfig -e -d <pci> q``; ``ParseMstconfigOutput`` takes the last three columns):

    Device #1:
    ----------

    Device type:        ConnectX7
    ...
    Configurations:                                     Default              Current              Next Boot
    *       NUM_OF_VFS                                  8                    16                   8
            SRIOV_EN                                    True(1)              True(1)              True(1)
            LINK_TYPE_P1                                IB(1)                IB(1)                IB(1)
    The '*' shows parameters with next value different from default/current value.

Without ``-e`` only the Next Boot column is printed; both layouts are accepted (Current is then unknown).
Values are printed as ``Name(number)`` (``True(1)``, ``IB(1)``), a bare name (``ETH``) or a number (``16``).
Stdlib only: the role's filter plugin imports it on the controller.
"""

from __future__ import annotations

import re
from typing import Any

KEYS = ("SRIOV_EN", "NUM_OF_VFS", "LINK_TYPE_P1", "LINK_TYPE_P2")
LINK_TYPES = ("IB", "ETH")
LINE = re.compile(r"^\s*\*?\s*(?P<key>[A-Z0-9_]+)\s+(?P<values>\S.*?)\s*$")
VALUE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)?(?:\((?P<number>-?\d+)\))?$")


class FirmwareError(ValueError):
    """One sentence naming the device, the setting and what was expected."""


def parse_value(text: str) -> dict[str, Any]:
    """``True(1)`` -> {name: "TRUE", number: 1}; ``16`` -> {name: None, number: 16}; ``ETH`` -> {name: "ETH"}."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return {"text": text, "name": None, "number": int(text)}
    match = VALUE.match(text)
    if not match or not (match.group("name") or match.group("number")):
        return {"text": text, "name": text.upper(), "number": None}
    number = match.group("number")
    return {
        "text": text,
        "name": match.group("name").upper() if match.group("name") else None,
        "number": int(number) if number is not None else None,
    }


def parse_query(text: str, device: str = "the device", keys: tuple[str, ...] = KEYS) -> dict[str, dict[str, Any]]:
    """The settings ``keys`` (default: the SR-IOV ones) of one ``mstconfig [-e] -d DEV q`` output: key -> {default,
    current, next}. The host_tuning role reads PCI_WR_ORDERING through it.

    Settings the firmware does not have (LINK_TYPE_P2 on a single-port card, LINK_TYPE_P* on an Ethernet-only
    card) are absent from the result. Raises FirmwareError when the text has no configuration table.
    """
    columns: list[str] | None = None
    settings: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.startswith("Configurations:"):
            header = line[len("Configurations:") :]
            columns = ["next"] if "Default" not in header else ["default", "current", "next"]
            continue
        if columns is None:
            continue
        match = LINE.match(line)
        if not match or match.group("key") not in keys:
            continue
        values = match.group("values").split()
        if len(values) < len(columns):
            raise FirmwareError(
                f"mstconfig query of {device}: the line for {match.group('key')} has {len(values)} value(s), "
                f"expected {len(columns)} ({', '.join(columns)}): {line.strip()!r}"
            )
        parsed = dict(zip(columns, (parse_value(value) for value in values[-len(columns) :]), strict=True))
        settings[match.group("key")] = {
            "default": parsed.get("default"),
            "current": parsed.get("current"),
            "next": parsed["next"],
        }
    if columns is None:
        raise FirmwareError(
            f"mstconfig query of {device} printed no 'Configurations:' table; accepted: the output of "
            f"mstconfig -e -d {device} q (mstflint) for a ConnectX device"
        )
    return settings


def _is_true(value: dict[str, Any] | None) -> bool | None:
    if value is None:
        return None
    if value["number"] is not None:
        return value["number"] != 0
    return value["name"] in ("TRUE", "YES", "ENABLED")


def _link_name(value: dict[str, Any] | None) -> str | None:
    return None if value is None else value["name"]


def desired(num_vfs: int, firmware_num_vfs: int | None, link_type: str) -> dict[str, Any]:
    """What the firmware should hold for ``num_vfs`` VFs.

    NUM_OF_VFS is the requested count unless ``firmware_num_vfs`` says otherwise, as sriov-network-operator sets it
    (``HandleTotalVfs``: firmware TotalVfs = the policy's NumVfs); ``link_type`` is IB, ETH or keep.
    With 0 VFs the firmware is left alone (nothing asked of it).
    """
    if num_vfs <= 0:
        return {}
    wanted: dict[str, Any] = {"SRIOV_EN": True, "NUM_OF_VFS": firmware_num_vfs if firmware_num_vfs else num_vfs}
    if link_type in LINK_TYPES:
        wanted["LINK_TYPE"] = link_type
    return wanted


def plan(device: str, query: dict[str, dict[str, Any]], wanted: dict[str, Any]) -> dict[str, Any]:
    """Compare one device's parsed query with ``wanted`` (from ``desired``).

    Returns {device, set_args (arguments after ``set``; empty when the Next Boot values already match),
    differences (one readable phrase per setting to change), pending (settings whose Current value differs from
    what is wanted: a reboot is needed before they apply), reboot_required, errors}.
    """
    set_args: list[str] = []
    differences: list[str] = []
    pending: list[str] = []
    errors: list[str] = []

    def compare(key: str, matches, shown: str, arg: str) -> None:
        entry = query.get(key)
        if entry is None:
            errors.append(
                f"mstconfig query of {device} shows no {key}; this firmware cannot set it (mstflint too old for the "
                f"device, or not a ConnectX SR-IOV device): set sriov_firmware: false and configure it with NVIDIA MFT"
            )
            return
        if not matches(entry["next"]):
            set_args.append(arg)
            differences.append(f"{key} {entry['next']['text']} -> {shown} (next boot)")
        if entry["current"] is not None and not matches(entry["current"]):
            pending.append(f"{key} {entry['current']['text']} now, {shown} after a reboot")

    if "SRIOV_EN" in wanted:
        compare("SRIOV_EN", lambda value: _is_true(value) is True, "True(1)", "SRIOV_EN=1")
    if "NUM_OF_VFS" in wanted:
        count = int(wanted["NUM_OF_VFS"])
        compare("NUM_OF_VFS", lambda value: value["number"] == count, str(count), f"NUM_OF_VFS={count}")
    if "LINK_TYPE" in wanted:
        link = wanted["LINK_TYPE"]
        ports = [key for key in ("LINK_TYPE_P1", "LINK_TYPE_P2") if key in query]
        # Ethernet-only cards have no LINK_TYPE settings: nothing to set there (sriov-network-operator treats a
        # missing LINK_TYPE_P1 as "Preconfigured").
        for key in ports:
            compare(key, lambda value, link=link: _link_name(value) == link, link, f"{key}={link}")
    return {
        "device": device,
        "set_args": set_args if not errors else [],
        "differences": differences,
        "pending": pending,
        "reboot_required": bool(set_args or pending) and not errors,
        "errors": errors,
    }
