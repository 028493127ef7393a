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
      C(fabric_count), C(fabric_port), C(link_downed), C(symbol_error), C(xid)), C(subject), C(status)
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "hardware": {"type": "dict", "required": True},
            "root": {"type": "path", "default": "/"},
            "previous_counters": {"type": "dict", "default": {}},
            "counter_increase_allowed": {"type": "dict", "default": {}},
            "kernel_log_file": {"type": "path"},
            "kernel_log_lines": {"type": "int", "default": 100000},
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
    results = health.verdicts(reading, hardware, text, module.params["previous_counters"] or None, allowed)
    module.exit_json(
        changed=False,
        verdicts=results,
        summary=health.summary(results),
        port_counters=reading["port_counters"],
        kernel_log_source=source,
        unreadable=reading["unreadable"],
    )


if __name__ == "__main__":
    main()
