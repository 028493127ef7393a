# SPDX-License-Identifier: Apache-2.0
"""TEST DOUBLES of setpci, mstconfig and update-grub for molecule/host_tuning and tests/unit/test_host_tuning_logic.py.

Never a real tool: each answers only what the host_tuning role and its script ask, in the real tool's output format
and exit status (sources in /work/notes/hosttuning.md, summarised in roles/host_tuning/README.md), over a JSON state
file in GPUFABRIC_TEST_STATE_DIR (default /var/lib/gpufabric-test) instead of hardware:

    test_doubles.py init --sysfs-root DIR      write the initial state for the SIMULATED tree under DIR (a sysfs root)
    test_doubles.py install --sysfs-root DIR   init, keep a copy of the state (*.prepared), and put a /bin/sh
                                               wrapper per tool in /usr/local/sbin
    test_doubles.py setpci [-v] [-D] -s BDF ECAP_ACS+0x6.w[=VALUE]
    test_doubles.py mstconfig [-e] [-y] -d BDF q|query [KEY...] | s|set KEY=VALUE...
    test_doubles.py update-grub

molecule/host_tuning runs `install`: /usr/local/sbin comes before /usr/sbin and /usr/bin on PATH (systemd's too), so
that the role and its boot units find the doubles by the real tools' names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

STATE_DIR = os.environ.get("GPUFABRIC_TEST_STATE_DIR", "/var/lib/gpufabric-test")
SETPCI_STATE = os.path.join(STATE_DIR, "setpci.json")
MSTCONFIG_STATE = os.path.join(STATE_DIR, "mstconfig.json")
TOOLS = ("setpci", "mstconfig", "update-grub")


def fail(message: str, status: int = 1) -> int:
    print(message, file=sys.stderr)
    return status


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def save(path: str, state: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2, sort_keys=True)
        handle.write("\n")


def read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------- init


def init(sysfs: str) -> int:
    """Every bridge of the tree with ACS Control 001d (the kernel's SV|RR|CR|UF, as in NVIDIA/nccl#2079) except the
    first PCIe switch's upstream port, which has no ACS capability; every ConnectX physical function forced to
    relaxed ordering (PCI_WR_ORDERING force_relax(1), shown because ADVANCED_PCI_SETTINGS is true)."""
    base = os.path.join(sysfs, "bus/pci/devices")
    names = sorted(os.listdir(base))
    bridge_names = [name for name in names if read(os.path.join(base, name, "class")).startswith("0x0604")]

    def parent(name: str) -> str:
        return os.path.basename(os.path.dirname(os.path.realpath(os.path.join(base, name))))

    # A switch upstream port: a bridge below a bridge, with bridges below it.
    upstream = [
        name for name in bridge_names if parent(name) in bridge_names and any(parent(o) == name for o in bridge_names)
    ]
    acs = {name: "001d" for name in bridge_names}
    acs[upstream[0]] = None
    save(SETPCI_STATE, {"acs": acs, "stuck": []})
    firmware = {
        name: {
            "SRIOV_EN": ["False(0)", "False(0)", "False(0)"],
            "ADVANCED_PCI_SETTINGS": ["False(0)", "True(1)", "True(1)"],
            "PCI_WR_ORDERING": ["per_mkey(0)", "force_relax(1)", "force_relax(1)"],
        }
        for name in names
        if read(os.path.join(base, name, "vendor")) == "0x15b3"
        and read(os.path.join(base, name, "class")).startswith("0x02")
        and not os.path.lexists(os.path.join(base, name, "physfn"))
    }
    save(MSTCONFIG_STATE, firmware)
    return 0


def install(sysfs: str) -> int:
    """init, a copy of the state to compare with after check mode, and the wrappers on PATH (one task, not eight:
    the scenario must stay cheap)."""
    init(sysfs)
    for path in (SETPCI_STATE, MSTCONFIG_STATE):
        shutil.copyfile(path, f"{path}.prepared")
    for tool in TOOLS:
        wrapper = os.path.join("/usr/local/sbin", tool)
        with open(wrapper, "w", encoding="utf-8") as handle:
            handle.write(
                f"#!/bin/sh\n# TEST DOUBLE of {tool} (molecule/host_tuning): state in {STATE_DIR}, no hardware.\n"
                f'exec /usr/bin/python3 {os.path.abspath(__file__)} {tool} "$@"\n'
            )
        os.chmod(wrapper, 0o755)
    return 0


# ---------------------------------------------------------------- setpci (pciutils)


def setpci(argv: list[str]) -> int:
    """setpci's answers for the ACS Control register: 4 hex digits; "-v" prints pciutils' verbose line; "-D" (demo)
    never writes; a device without the capability: setpci's die() message on stderr, exit 1."""
    verbose = demo = False
    device = operation = None
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "-v":
            verbose = True
        elif arg == "-D":
            demo = True
        elif arg == "-s" and args:
            device = args.pop(0)
        else:
            operation = arg
    match = re.fullmatch(r"ECAP_ACS\+(?:0x)?6\.w(?:=([0-9a-fA-F]{1,4}))?", operation or "")
    if device is None or match is None:
        return fail(f"setpci (TEST DOUBLE): only -s BDF ECAP_ACS+0x6.w[=VALUE] is implemented, got {argv}", 2)
    state = load(SETPCI_STATE)
    if device not in state["acs"]:
        return fail(f"setpci (TEST DOUBLE): no device {device} in {SETPCI_STATE}", 2)
    value = state["acs"][device]
    if value is None:
        return fail(
            "setpci: Instance #0 of Extended capability 000d not found - there are no capabilities with that id."
        )
    if match.group(1) is None:
        print(f"{device} (ecap 000d @2a0) @2a6 = {value}" if verbose else value)
        return 0
    # A bridge listed under "stuck" takes no write (a test of the script's read-back).
    if not demo and device not in state["stuck"]:
        state["acs"][device] = f"{int(match.group(1), 16):04x}"
        save(SETPCI_STATE, state)
    return 0


# ---------------------------------------------------------------- mstconfig (mstflint)

VALUES = {
    "PCI_WR_ORDERING": {
        "0": "per_mkey(0)",
        "1": "force_relax(1)",
        "PER_MKEY": "per_mkey(0)",
        "FORCE_RELAX": "force_relax(1)",
    },
    "ADVANCED_PCI_SETTINGS": {"0": "False(0)", "1": "True(1)", "FALSE": "False(0)", "TRUE": "True(1)"},
    "SRIOV_EN": {"0": "False(0)", "1": "True(1)", "FALSE": "False(0)", "TRUE": "True(1)"},
}


def visible(settings: dict) -> dict:
    """PCI_WR_ORDERING only while ADVANCED_PCI_SETTINGS is true (mstflint mlxconfig_host.db)."""
    shown = dict(settings)
    if settings["ADVANCED_PCI_SETTINGS"][1] != "True(1)":
        shown.pop("PCI_WR_ORDERING")
    return shown


def mstconfig(argv: list[str]) -> int:
    """mstconfig's query table (Default, Current and Next Boot with -e; a '*' where Next Boot differs) and set, which
    changes Next Boot only and needs -y, as mstflint's mstconfig prints them (layout of molecule/sriov's double)."""
    device, verbose, yes, args = None, False, False, list(argv)
    while args and args[0].startswith("-"):
        arg = args.pop(0)
        if arg in ("-d", "--dev") and args:
            device = args.pop(0)
        elif arg in ("-e", "--enable_verbosity"):
            verbose = True
        elif arg in ("-y", "--yes"):
            yes = True
        else:
            return fail(f"-E- mstconfig (TEST DOUBLE) does not know option {arg}")
    if not args:
        return fail("-E- No command found. For more information please read the help message:")
    state = load(MSTCONFIG_STATE)
    if device not in state:
        return fail("-E- Failed to open the device", 3)
    settings, command, params = state[device], args[0], args[1:]
    if command in ("q", "query"):
        shown = visible(settings)
        for key in params:
            if key not in shown:
                return fail(f"-E- The Device doesn't support {key} parameter")
        print(f"\nDevice #1:\n----------\n\n{'Device type:':<20}ConnectX7\n{'Device:':<20}{device}\n")
        if verbose:
            print(f"{'Configurations:':<52}{'Default':<21}{'Current':<21}Next Boot")
        else:
            print(f"{'Configurations:':<45}Next Boot")
        for key, (default, current, next_boot) in shown.items():
            if params and key not in params:
                continue
            star = "*" if next_boot != default or next_boot != current else " "
            if verbose:
                print(f"{star:<8}{key:<44}{default:<21}{current:<21}{next_boot}")
            else:
                print(f"{star:<9}{key:<36}{next_boot}")
        print("The '*' shows parameters with next value different from default/current value.")
        return 0
    if command not in ("s", "set") or not params:
        return fail(f"-E- mstconfig (TEST DOUBLE) does not implement {command} {params}")
    changes = {}
    for param in params:
        key, _sep, value = param.partition("=")
        if key not in VALUES or value.upper() not in VALUES[key]:
            return fail(f"-E- Bad value or parameter: {param}")
        changes[key] = VALUES[key][value.upper()]
    if not yes:
        return fail("\n Apply new Configuration? (y/n) [n] : n\n-E- Aborted by user")
    print("\n Apply new Configuration? (y/n) [n] : y\nApplying... Done!")
    print("-I- Please reboot machine to load new configurations.")
    for key, value in changes.items():
        settings[key][2] = value
    save(MSTCONFIG_STATE, state)
    return 0


# ---------------------------------------------------------------- update-grub


def update_grub() -> int:
    """Source /etc/default/grub, then /etc/default/grub.d/*.cfg in lexical order, as grub-mkconfig does, and write
    /boot/grub/grub.cfg whose linux line shows the resulting kernel command line."""
    script = (
        '. /etc/default/grub; for f in /etc/default/grub.d/*.cfg; do [ -e "$f" ] && . "$f"; done; '
        'printf "%s\\n" "$GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT"'
    )
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return fail(f"update-grub (TEST DOUBLE): {done.stderr.strip()}")
    cmdline = " ".join(done.stdout.split())
    os.makedirs("/boot/grub", exist_ok=True)
    with open("/boot/grub/grub.cfg", "w", encoding="utf-8") as handle:
        handle.write("# TEST DOUBLE of grub.cfg (molecule/host_tuning): no boot loader here.\n")
        handle.write(f"\tlinux\t/boot/vmlinuz root=/dev/sda1 ro {cmdline}\n".replace(" \n", "\n"))
    print("Generating grub configuration file ...\ndone", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] in (["init"], ["install"]) and argv[1:2] == ["--sysfs-root"] and len(argv) == 3:
        return init(argv[2]) if argv[0] == "init" else install(argv[2])
    if argv[:1] == ["setpci"]:
        return setpci(argv[1:])
    if argv[:1] == ["mstconfig"]:
        return mstconfig(argv[1:])
    if argv == ["update-grub"]:
        return update_grub()
    return fail(f"usage: see {__file__}", 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
