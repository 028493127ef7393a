# SPDX-License-Identifier: Apache-2.0
"""Group a fleet's rack-scale NVLink hosts (GB200/GB300 NVL72) into their NVLink domains, with findings.

One NVLink domain is the set of hosts whose GPUs share one NVLink fabric (an NVL72 rack: 18 hosts of 4 GPUs).
IMEX joins exactly these hosts, and NCCL's multi-node NVLink spans only them, so a domain must hold hosts of one
profile and no more hosts than the profile's domain has. A host names its domain with the host variable
gpufabric_nvlink_domain (set by hand, or by an inventory source from the cloud's own data).

Shared by `gpufabric plan` (driver) and the plays, like fabric_plan: what the plan shows is what a play sees.
"""

from __future__ import annotations

from typing import Any

DOMAIN_VAR = "gpufabric_nvlink_domain"


def _finding(severity: str, check: str, message: str) -> dict[str, str]:
    return {"severity": severity, "check": check, "message": message}


def group(plans: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{"domains": {domain: {...}}, "findings": [...]} over host plans (fabric_plan.plan_host's, by host name).

    A domain lists its members (sorted), their profiles, GPUs, the hosts one domain of the profile holds and its
    findings. Hosts that gpufabric leaves alone (NOT MANAGED) take no part. An NVLink host that names no domain is
    a finding of the fleet's.
    """
    domains: dict[str, dict[str, Any]] = {}
    fleet_findings: list[dict[str, str]] = []
    for name, plan in sorted(plans.items()):
        if plan.get("unmanaged"):
            continue
        nvlink = plan.get("nvlink") or {}
        domain = nvlink.get("domain")
        if not nvlink:
            continue  # no multi-node NVLink (fabric_plan warns when such a host names a domain)
        if not domain:
            fleet_findings.append(
                _finding(
                    "error",
                    "nvlink_domain",
                    f"{name}: profile {plan['profile']} spans NVLink domains of {nvlink['hosts_per_domain']} hosts, "
                    f"but the host names none; accepted: host var {DOMAIN_VAR} (the rack or NVLink domain id)",
                )
            )
            continue
        entry = domains.setdefault(domain, {"members": [], "profiles": [], "gpus": 0, "hosts_per_domain": None})
        entry["members"].append(name)
        if plan["profile"] not in entry["profiles"]:
            entry["profiles"].append(plan["profile"])
        entry["gpus"] += int(plan["gpus"]["count"])
        entry["hosts_per_domain"] = nvlink["hosts_per_domain"]
    for domain, entry in domains.items():
        entry["findings"] = _domain_findings(domain, entry)
    return {"domains": dict(sorted(domains.items())), "findings": fleet_findings}


def _domain_findings(domain: str, entry: dict[str, Any]) -> list[dict[str, str]]:
    findings = []
    if len(entry["profiles"]) > 1:
        findings.append(
            _finding(
                "error",
                "nvlink_domain_profiles",
                f"domain {domain} mixes profiles {', '.join(entry['profiles'])}; one NVLink domain is one kind of host",
            )
        )
        return findings  # its size has no single meaning
    members, full = len(entry["members"]), entry["hosts_per_domain"]
    if members > full:
        findings.append(
            _finding(
                "error",
                "nvlink_domain_size",
                f"domain {domain} has {members} hosts, more than the {full} one NVLink domain of "
                f"{entry['profiles'][0]} holds: the inventory puts hosts of two domains under one name",
            )
        )
    elif members < full:
        findings.append(
            _finding(
                "warning",
                "nvlink_domain_size",
                f"domain {domain} has {members} of its {full} hosts: IMEX and multi-node NVLink span only these",
            )
        )
    return findings


def has_errors(domains: dict[str, Any]) -> bool:
    """Whether group()'s result holds an error finding (the fleet's or a domain's)."""
    findings = [*domains["findings"], *(f for entry in domains["domains"].values() for f in entry["findings"])]
    return any(finding["severity"] == "error" for finding in findings)


# `gpufabric verify --nvlink`: a run within one NVLink domain (judged by the profile's nvlink.thresholds) and a run
# across domains, one host from each, so that every byte crosses the scale-out fabric (bandwidth.thresholds).
SCOPES = ("within", "across")


def scope_hosts(domains: dict[str, Any], scope: str, nodes: int | None = None) -> list[str]:
    """The hosts of one scope's run, from group()'s "domains": ``within`` the members of the largest domain (the
    first by name among equals), ``across`` the first member of each domain; the first ``nodes`` of them when given.
    ValueError naming what is missing when the fleet cannot hold such a run."""
    if scope not in SCOPES:
        raise ValueError(f"--nvlink {scope!r} is not a scope; accepted: {', '.join(SCOPES)}")
    if not domains:
        raise ValueError(
            f"--nvlink {scope}: no host of the inventory is in an NVLink domain (a multi-node NVLink profile with "
            f"host var {DOMAIN_VAR})"
        )
    if scope == "within":
        name = max(sorted(domains), key=lambda domain: len(domains[domain]["members"]))
        hosts = list(domains[name]["members"])
        where = f"domain {name} has {len(hosts)} host(s)"
    else:
        hosts = [entry["members"][0] for _domain, entry in sorted(domains.items())]
        where = f"the inventory has {len(hosts)} NVLink domain(s)"
    hosts = hosts[:nodes] if nodes else hosts
    if len(hosts) < 2:
        raise ValueError(
            f"--nvlink {scope}: a run {'within one domain' if scope == 'within' else 'across domains'} needs two "
            f"hosts or more, and {where}{' (--nodes ' + str(nodes) + ')' if nodes else ''}"
        )
    return hosts
