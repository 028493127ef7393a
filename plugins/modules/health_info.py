#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: health_info
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Judge a GPU host's health against its catalog profile, one verdict per check
description:
  - Reads the host's GPUs, the PCIe links of its GPUs and GPU-network NICs, its GPU-network RDMA ports and their
    counters from C(/sys), and the Xid events of the NVIDIA driver from the kernel log since boot, and returns one
    verdict per check and device.
  - Each verdict's C(status) is C(pass), C(fail) (with an C(action), C(monitor), C(reset_gpu), C(reboot) or
    C(isolate), and the C(evidence) read) or C(unknown) when the host could not answer; never C(pass) then.
  - Checks GPU count and model against O(hardware); every GPU's and GPU-network NIC's C(current_link_width) and
    C(current_link_speed) against the same device's C(max_link_width) and C(max_link_speed); every GPU-network RDMA
    port C(ACTIVE) at the profile's rate; C(counters/link_downed) and C(counters/symbol_error) against
    O(previous_counters); Xid codes against NVIDIA's Xid catalog (see docs/health.md for the sources).
  - Asks C(nvidia-smi) (read-only queries) for each GPU's uncorrectable ECC errors, pending and failed row remaps,
    pages pending retirement and active clock-event reasons; without C(nvidia-smi) those checks are C(unknown).
  - Only reads; it never changes the host.
options:
  hardware:
    description:
      - The host's plan's C(hardware) (C(gpufabric_plan.hardware)), the catalog profile's C(fabric), C(gpu) and
        C(nics).
    type: dict
    required: true
  root:
    description:
      - Directory that holds the C(sys) tree to read; use it for a host's root mounted elsewhere.
    type: path
    default: /
  previous_counters:
    description:
      - The C(port_counters) an earlier run returned, to tell whether C(link_downed) and C(symbol_error) rose since.
      - Empty on the first run, when those checks are C(unknown) and say so.
    type: dict
    default: {}
  counter_increase_allowed:
    description:
      - How much each counter (C(link_downed), C(symbol_error)) may rise between two readings before it fails.
    type: dict
    default: {}
  kernel_log_file:
    description:
      - Read the kernel log from this file instead of C(journalctl -k -b) (or C(dmesg) where journalctl cannot
        answer); for hosts that keep it in a file, and for simulated hosts.
    type: path
  kernel_log_lines:
    description:
      - At most this many of the newest kernel-log lines are read.
    type: int
    default: 100000
  nvlink:
    description:
      - Whether the profile's GPUs have NVLink (NVSwitch or multi-node NVLink); then C(nvidia-smi nvlink -s) is asked
        and every GPU's links must be up, as many as its peers'.
    type: bool
    default: false
  services:
    description:
      - systemd units the plan needs running (C(nvidia-fabricmanager), C(nvidia-imex)), judged by their
        C(ActiveState) (C(systemctl show -p ActiveState --value), read-only).
    type: list
    elements: str
    default: []
  service_states:
    description:
      - Saved C(ActiveState) per unit, read instead of asking systemctl (simulated hosts).
    type: dict
  nvidia_smi_dir:
    description:
      - Read nvidia-smi's answers from C(query-gpu.csv), C(query-remapped-rows.csv) and C(nvlink-status.txt) in this
        directory instead of running C(nvidia-smi) (for simulated hosts; the files hold the output of the queries
        docs/health.md names).
      - Without it, C(nvidia-smi) runs only when O(root) is C(/); otherwise the GPU memory and clock checks are
        C(unknown), as on a host without C(nvidia-smi).
    type: path
attributes:
  check_mode:
    description: Can run in check mode and return the changed status it predicts without changing the target.
    support: full
  diff_mode:
    description: Returns details on what has changed (or, in check mode, would change) in diff mode.
    support: none
  idempotent:
    description: Run again with the same arguments, it changes nothing and reports C(changed=false).
    support: full
"""

EXAMPLES = r"""
- name: Judge the host's health against its plan
  gpufabric.cluster.health_info:
    hardware: "{{ gpufabric_plan.hardware }}"
  register: health

- name: Judge it again, comparing the port counters with the first reading
  gpufabric.cluster.health_info:
    hardware: "{{ gpufabric_plan.hardware }}"
    previous_counters: "{{ health.port_counters }}"
"""

RETURN = r"""
verdicts:
  description:
    - One verdict per check and device, each with C(check) (C(gpu_count), C(gpu_model), C(pcie_link),
      C(fabric_count), C(fabric_port), C(link_downed), C(symbol_error), C(xid), C(gpu_memory), C(ecc_uncorrected),
      C(row_remap), C(row_remap_pending), C(row_remap_failure), C(retired_pages), C(retired_pages_pending),
      C(clock_events), C(nvlink), C(service)), C(subject), C(status)
      (C(pass), C(fail) or C(unknown)), C(action) (on C(fail), one of C(monitor), C(reset_gpu), C(reboot) or
      C(isolate)), C(message) and C(evidence).
  returned: always
  type: list
  elements: dict
  sample:
    - check: pcie_link
      subject: "0000:13:00.0"
      status: fail
      action: reboot
      message: GPU 0000:13:00.0 links at x8; it and its slot can do x16
      evidence: {current_link_width: 8, max_link_width: 16, current_link_speed: 32.0 GT/s PCIe,
                 max_link_speed: 32.0 GT/s PCIe}
summary:
  description:
    - C(status) C(fail) if any check failed, else C(unknown) if any could not answer, else C(pass); C(action), the
      strongest action asked for; C(counts) of each status.
  returned: always
  type: dict
  sample: {status: fail, action: reboot, counts: {pass: 40, fail: 1, unknown: 0}}
port_counters:
  description: The counters read, by C(device/port), to pass as O(previous_counters) next time.
  returned: always
  type: dict
  sample: {mlx5_0/1: {link_downed: 0, symbol_error: 0}}
nvidia_smi_source:
  description: Where nvidia-smi's answers came from, or why there are none.
  returned: always
  type: str
  sample: nvidia-smi
versions:
  description:
    - The driver and VBIOS versions nvidia-smi reported and the GPU-network HCAs' firmware
      (C(/sys/class/infiniband/<dev>/fw_ver)) and C(libnccl2)'s version in dpkg's database, each distinct, for
      the fleet's version-skew check.
  returned: always
  type: dict
  sample:
    driver: ["550.90.07"]
    vbios: ["96.00.89.00.01"]
    hca_firmware: ["28.39.1002"]
    nccl: ["2.21.5-1+cuda12.4"]
kernel_log_source:
  description: Where the kernel log was read from, or why it could not be.
  returned: always
  type: str
  sample: journalctl -k -b
unreadable:
  description: What could not be read, each with C(path) and C(reason).
  returned: always
  type: list
  elements: dict
"""

import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.cluster.plugins.module_utils import health


def kernel_log(module: AnsibleModule) -> tuple[str | None, str]:
    """The kernel log since boot, newest ``kernel_log_lines`` lines, and where it came from; None when unreadable."""
    lines = module.params["kernel_log_lines"]
    path = module.params["kernel_log_file"]
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return "\n".join(handle.read().splitlines()[-lines:]), path
        except OSError as exc:
            return None, f"{path}: {exc.strerror or exc}"
    reasons = []
    for command in (
        ["journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short", "-n", str(lines)],
        ["dmesg"],
    ):
        binary = module.get_bin_path(command[0])
        if not binary:
            reasons.append(f"{command[0]}: not found")
            continue
        rc, out, err = module.run_command([binary, *command[1:]])
        # journalctl without access to the journal prints a hint and no entries: that is no answer either.
        if rc == 0 and out.strip():
            name = " ".join(command[:3]) if command[0] == "journalctl" else "dmesg"
            return "\n".join(out.splitlines()[-lines:]), name
        reasons.append(f"{command[0]}: rc {rc}, {(err or 'no output').strip()[:200]}")
    return None, "; ".join(reasons)


SMI_FILES = {"gpus": "query-gpu.csv", "remaps": "query-remapped-rows.csv", "nvlink": "nvlink-status.txt"}
PARSERS = {
    "gpus": lambda text: health.parse_smi_csv(text, health.SMI_GPU_FIELDS),
    "remaps": lambda text: health.parse_smi_csv(text, health.SMI_REMAP_FIELDS),
    "nvlink": health.parse_nvlink_status,
}
COMMANDS = {"gpus": health.SMI_GPU_COMMAND, "remaps": health.SMI_REMAP_COMMAND, "nvlink": health.SMI_NVLINK_COMMAND}


def nvidia_smi(module: AnsibleModule) -> dict[str, Any]:
    """nvidia-smi's answers ({"gpus", "remaps", "nvlink", "source"}); None for a query that could not be answered."""
    directory = module.params["nvidia_smi_dir"]
    answers: dict[str, Any] = dict.fromkeys(SMI_FILES)
    if directory:
        for key, name in SMI_FILES.items():
            try:
                with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                    answers[key] = PARSERS[key](handle.read())
            except OSError:
                answers[key] = None
        return answers | {"source": directory}
    if module.params["root"] != "/":
        return answers | {"source": "not asked: root is not /, and nvidia-smi would read this machine"}
    binary = module.get_bin_path("nvidia-smi")
    if not binary:
        return answers | {"source": "nvidia-smi: not found"}
    for key, command in COMMANDS.items():
        if key == "nvlink" and not module.params["nvlink"]:
            continue
        rc, out, _err = module.run_command([binary, *command[1:]])
        answers[key] = PARSERS[key](out) if rc == 0 else None
    return answers | {"source": "nvidia-smi"}


def service_states(module: AnsibleModule) -> dict[str, str | None]:
    """{unit: its systemd ActiveState} of each unit in ``services``; None where systemctl could not answer. Saved
    states (``service_states``) stand in for systemctl on simulated hosts."""
    units = module.params["services"]
    saved = module.params["service_states"]
    if saved is not None:
        return {unit: saved.get(unit) for unit in units}
    if module.params["root"] != "/":
        return dict.fromkeys(units)
    binary = module.get_bin_path("systemctl")
    states: dict[str, str | None] = {}
    for unit in units:
        rc, out, _err = (
            (1, "", "") if not binary else module.run_command([binary, "show", "-p", "ActiveState", "--value", unit])
        )
        states[unit] = out.strip() if rc == 0 and out.strip() else None
    return states


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "hardware": {"type": "dict", "required": True},
            "root": {"type": "path", "default": "/"},
            "previous_counters": {"type": "dict", "default": {}},
            "counter_increase_allowed": {"type": "dict", "default": {}},
            "kernel_log_file": {"type": "path"},
            "kernel_log_lines": {"type": "int", "default": 100000},
            "nvidia_smi_dir": {"type": "path"},
            "nvlink": {"type": "bool", "default": False},
            "services": {"type": "list", "elements": "str", "default": []},
            "service_states": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    hardware = module.params["hardware"]
    missing = [key for key in ("gpu", "nics") if not isinstance(hardware.get(key), dict)]
    if missing:
        module.fail_json(
            msg=f"hardware lacks {', '.join(missing)}: pass the host's plan's hardware (gpufabric_plan.hardware) of "
            "a catalog profile"
        )
    allowed = module.params["counter_increase_allowed"]
    bad = {key: value for key, value in allowed.items() if key not in health.COUNTERS or not isinstance(value, int)}
    if bad:
        module.fail_json(
            msg=f"counter_increase_allowed: {bad!r} is not accepted; accepted: "
            f"{', '.join(health.COUNTERS)}, each a whole number"
        )
    reading = health.read_host(module.params["root"], hardware)
    text, source = kernel_log(module)
    smi = nvidia_smi(module) | {"nvlink_expected": module.params["nvlink"], "services": service_states(module)}
    results = health.verdicts(reading, hardware, text, module.params["previous_counters"] or None, allowed, smi)
    module.exit_json(
        changed=False,
        verdicts=results,
        summary=health.summary(results),
        port_counters=reading["port_counters"],
        kernel_log_source=source,
        nvidia_smi_source=smi["source"],
        versions=health.host_versions(smi["gpus"], reading),
        unreadable=reading["unreadable"],
    )


if __name__ == "__main__":
    main()
