# SPDX-License-Identifier: Apache-2.0
"""`gpufabric plan --probe`: read each host's hardware and hold it against its profile.

Facts come from the collection's `fabric_facts` module, run over the
inventory's own connections (SSH, podman, local) by ansible-runner, with the same Ansible
configuration as `gpufabric apply` (runs.base_env); the
comparison is `plugins/module_utils/fabric_findings.py`, shared with the roles.
A host var `gpufabric_hw_root` points the module at another root (a simulated
tree in tests and the lab); it defaults to `/`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import ansible_runner

from gpufabric import runs
from gpufabric.collection import module_utils, plugin_utils

FACTS_KEY = "gpufabric_hardware"


def gather(inventory: str, forks: int = 20) -> dict[str, dict[str, Any]]:
    """{host: {"facts": dict|None, "error": str|None}} for every host that answered or failed."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gpufabric-probe-") as private_dir, runs.runner_signals():
        runner = ansible_runner.run(
            private_data_dir=private_dir,
            inventory=str(Path(inventory).resolve()) if Path(inventory).exists() else inventory,
            host_pattern="all",
            module="gpufabric.cluster.fabric_facts",
            # packages: the installed stack packages, which the adopting roles' plans read.
            module_args="root={{ gpufabric_hw_root | default('/') }} packages=true",
            forks=forks,
            quiet=True,
            # As apply's: this collection, the `ansible` beside this Python, the user's ansible.cfg (a bastion's
            # ssh_common_args, remote_user, ...) and host key checking as the user's configuration decides it.
            envvars=runs.base_env(),
        )
        for event in runner.events:
            data = event.get("event_data", {})
            host, result = data.get("host"), data.get("res", {})
            if event.get("event") == "runner_on_ok":
                results[host] = {"facts": result.get("ansible_facts", {}).get(FACTS_KEY), "error": None}
            elif event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
                kind = "unreachable" if event["event"] == "runner_on_unreachable" else "failed"
                results[host] = {"facts": None, "error": f"{kind}: {result.get('msg', 'no message')}"}
    return results


def probe_host(plan: dict[str, Any], hostvars: dict[str, Any], answer: dict[str, Any] | None, catalog: Any) -> None:
    """Add a "probe" section to one host's plan; infer a profile for profile-less bare metal."""
    findings_module = module_utils("fabric_findings")
    if answer is None or answer["facts"] is None:
        error = answer["error"] if answer else "no answer from the host"
        plan["probe"] = {"reachable": False, "error": error, "findings": []}
        return
    facts = answer["facts"]
    profile = catalog.get(plan["profile"])
    if plan["profile"] == "unknown" and not hostvars.get("gpufabric_profile"):
        # A suggestion only: apply and drift go by the inventory, so the host stays not managed (and the
        # plan says so) until the operator sets gpufabric_profile. Its hardware is held against the suggestion.
        cloud = hostvars.get("gpufabric_cloud") or "baremetal"
        name, reason = findings_module.infer_profile(facts, catalog, cloud=cloud)
        if name is not None:
            plan["suggested_profile"] = {"name": name, "reason": reason}
            plan["warnings"].append(f"{reason}: set gpufabric_profile: {name} to manage it")
            profile = catalog.get(name)
        else:
            plan["warnings"].append(reason)
    plan["probe"] = {
        "reachable": True,
        "error": None,
        "findings": findings_module.findings(facts, profile) if profile else [],
        "summary": _summary(facts),
    }
    if plan.get("nic_placeholders") and plan.get("nic_names") is None:
        # The environment as the host's own NIC names make it (the plan role does the same on the host).
        try:
            named = module_utils("fabric_nics").resolve(plan, facts)
        except ValueError as exc:
            plan["probe"]["findings"].append(
                {"severity": "error", "check": "nic_names", "subject": "env", "message": str(exc)}
            )
        else:
            plan.update(env=named["env"], nics=named["nics"], nic_names=named["nic_names"])


def _summary(facts: dict[str, Any]) -> dict[str, Any]:
    return {
        "gpus": len(facts.get("gpus", [])),
        "nvswitches": len(facts.get("nvswitches", [])),
        "nics": len(facts.get("nics", [])),
        "rdma_devices": len(facts.get("rdma_devices", [])),
        "kernel": facts.get("host", {}).get("kernel"),
    }


def has_problems(plan: dict[str, Any]) -> bool:
    """True when a probed host is unreachable, has an error finding, or is not managed (apply and drift
    would fail on it too) unless excluded on purpose."""
    for host in plan["hosts"].values():
        unmanaged = host.get("unmanaged")
        if unmanaged and unmanaged["code"] != plugin_utils("fabric_plan").EXCLUDED:
            return True
        probe = host.get("probe")
        if probe and (not probe["reachable"] or any(f["severity"] == "error" for f in probe["findings"])):
            return True
    return False
