# SPDX-License-Identifier: Apache-2.0
"""A profile's NICs by identity, and the environment values that name them.

The catalog never names a network interface: each image names them its own way (Google's Ubuntu images
``enp0s12``, ``enp6s0``, ...; Container-Optimized OS and ``net.ifnames=0`` ``eth0``, ``eth1``, ...). A profile
describes its NIC groups by what does not change with the image (kind, PCI ids, count, GPU affinity, order on
the bus: ``fabric_findings.gpu_network`` and ``management_nics``), and an environment value that needs names
refers to a group symbolically:

- ``{nics.gpu}``: the GPU-network NICs' interface names, in PCI order, comma-joined;
- ``{nics.gpu[N]}``: the N-th of them (from 0);
- ``{nics.management}``, ``{nics.management[N]}``: the same for the management NICs;
- ``{nics.gpu_rdma}``, ``{nics.gpu_rdma[N]}``: the RDMA device names of ConnectX GPU NICs (``mlx5_ib0`` where
  Azure's HPC images rename them, ``mlx5_0`` on a plain image), in PCI order; ``{nics.gpu_rdma:P}`` gives each
  with port ``P`` appended (``mlx5_ib0:1,...``, UCX_NET_DEVICES' form).

So ``NCCL_GPUDIRECTTCPX_TX_BINDINGS: "{nics.gpu[0]}:8-21,112-125;..."``. The catalog loader checks the
placeholders (``placeholder_errors``); the host's plan gets the names from the host's hardware facts
(hw_facts.gather, the fabric_facts module) through ``resolve``, the one place names are put into values.

Pure Python (stdlib only), shared by the plan role's filter, the driver (``gpufabric plan --probe``) and the tests.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.module_utils import fabric_findings

GROUPS = ("gpu", "management", "gpu_rdma")
PLACEHOLDER = re.compile(r"\{nics\.(gpu_rdma|gpu|management)(?:\[([0-9]+)\])?(?::([0-9]+))?\}")
# Anything a placeholder could be meant as: a brace pair whose text starts with "nics".
MAYBE_PLACEHOLDER = re.compile(r"\{\s*nics[^{}]*\}")
# GPU NIC kinds whose devices have interface names (EFA devices have none).
NAMED_GPU_KINDS = ("gvnic", "ethernet", "connectx_ib", "connectx_roce")
# GPU NIC kinds whose RDMA devices the host names (ConnectX: mlx5_<N>, or what the image's udev rules make of it).
RDMA_GPU_KINDS = ("connectx_ib", "connectx_roce")
HOST = "the host has"
ACCEPTED = (
    "{nics.gpu}, {nics.gpu[N]}, {nics.management}, {nics.management[N]}, {nics.gpu_rdma}, {nics.gpu_rdma[N]} "
    "(N from 0), or {nics.gpu_rdma:P} / {nics.gpu_rdma[N]:P} (P: the port, from 1)"
)


def group_spec(nics: dict[str, Any], group: str) -> dict[str, Any]:
    """The catalog's NIC section a group's names belong to (gpu_rdma: the GPU NICs' RDMA devices)."""
    return nics["gpu" if group == "gpu_rdma" else group]


def group_count(nics: dict[str, Any], group: str) -> int:
    return int(group_spec(nics, group).get("count", 1))


def placeholder_errors(value: str, nics: dict[str, Any]) -> list[str]:
    """Why the placeholders in one environment value cannot be resolved on any host of the profile ([]: they can)."""
    errors = []
    for token in MAYBE_PLACEHOLDER.findall(value):
        match = PLACEHOLDER.fullmatch(token)
        if not match:
            errors.append(f"placeholder {token} is not accepted; accepted: {ACCEPTED}")
            continue
        group, index, port = match.group(1), match.group(2), match.group(3)
        spec = group_spec(nics, group)
        if port is not None and (group != "gpu_rdma" or int(port) < 1):
            errors.append(f"placeholder {token}: a port suffix (:P, P from 1) is accepted on nics.gpu_rdma only")
        elif group == "gpu" and spec["kind"] not in NAMED_GPU_KINDS:
            errors.append(f"placeholder {token}: {spec['kind']} NICs have no interface names")
        elif group == "gpu_rdma" and spec["kind"] not in RDMA_GPU_KINDS:
            kinds = ", ".join(RDMA_GPU_KINDS)
            errors.append(f"placeholder {token}: {spec['kind']} GPU NICs are not ConnectX; accepted: kind {kinds}")
        elif group == "management" and spec["kind"] not in fabric_findings.MANAGEMENT_KINDS:
            kinds = ", ".join(fabric_findings.MANAGEMENT_KINDS)
            errors.append(
                f"placeholder {token}: a management NIC of kind {spec['kind']!r} is found by no identity; "
                f"accepted: kind {kinds}"
            )
        elif index is not None and int(index) >= group_count(nics, group):
            errors.append(f"placeholder {token}: nics.{group} has {group_count(nics, group)} NICs (count)")
    return errors


def symbolic(env: dict[str, Any]) -> list[str]:
    """The variables of ``env`` whose values refer to NICs symbolically, in env order."""
    return [key for key, value in env.items() if isinstance(value, str) and MAYBE_PLACEHOLDER.search(value)]


def host_nics(facts: dict[str, Any], hardware: dict[str, Any]) -> dict[str, list[str]]:
    """The interface names the host gives the profile's NIC groups, each in PCI order; and, where the GPU NICs are
    ConnectX, their RDMA devices' names (``gpu_rdma``).

    ``hardware``: the profile's hardware sections (the plan's ``hardware``: fabric, gpu, nics, sriov). GPU NICs are
    ``fabric_findings.gpu_network`` (gVNICs by identity and GPU affinity; ConnectX rails by link layer and affinity,
    their netdevs), management NICs ``fabric_findings.management_nics``.
    """
    gpu = [
        item["netdev"]
        for item in fabric_findings.gpu_network(facts, hardware)
        if item["netdev"] is not None and item["netdev"].get("name")
    ]
    # A ConnectX rail's order is its PCI function's (the netdev's), as for gVNICs.
    gpu.sort(key=fabric_findings._pci_order)
    management = fabric_findings.management_nics(facts, hardware)
    names = {"gpu": [nic["name"] for nic in gpu], "management": [nic["name"] for nic in management]}
    if hardware["nics"]["gpu"]["kind"] in RDMA_GPU_KINDS:
        rdma = [item["rdma"] for item in fabric_findings.gpu_network(facts, hardware) if item["rdma"] is not None]
        names["gpu_rdma"] = [device["name"] for device in sorted(rdma, key=fabric_findings._pci_order)]
    return names


def render(value: str, names: dict[str, list[str]], nics: dict[str, Any]) -> tuple[str, list[str]]:
    """``value`` with its placeholders replaced by ``names``; and the placeholders ``names`` cannot fill."""
    missing: list[str] = []

    def fill(match: re.Match[str]) -> str:
        group, index, port = match.group(1), match.group(2), match.group(3)
        found = names.get(group) or []
        want = group_count(nics, group)
        if len(found) < want or (index is not None and int(index) >= len(found)):
            missing.append(match.group(0))
            return match.group(0)
        chosen = found[:want] if index is None else [found[int(index)]]
        return ",".join(f"{name}:{port}" if port else name for name in chosen)

    return PLACEHOLDER.sub(fill, value), missing


def _describe(names: dict[str, list[str]], nics: dict[str, Any]) -> str:
    parts = []
    for group in GROUPS:
        found = names.get(group) or []
        spec = group_spec(nics, group)
        if group == "gpu_rdma" and spec["kind"] not in RDMA_GPU_KINDS:
            continue
        what = "RDMA devices of the gpu NICs" if group == "gpu_rdma" else f"{group} NICs"
        parts.append(
            f"{len(found)} of {group_count(nics, group)} {what} ({spec['kind']})"
            + (f": {', '.join(found)}" if found else "")
        )
    return "; ".join(parts)


def resolve(host_plan: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """The host's plan with its NICs named from the host's hardware facts (``host_nics``).

    Sets ``nic_names`` ({"gpu": [...], "management": [...]}, each in PCI order), ``nics.gpu.interfaces`` and
    ``nics.management.interfaces`` (what the fabric roles check and configure) and fills the placeholders of
    ``env``. Raises ValueError naming the variable, the placeholder, the profile and what the host has, when the
    host lacks the NICs a placeholder needs. A plan without a profile comes back as it was.
    """
    if not host_plan.get("hardware"):
        return host_plan
    return _named(host_plan, host_nics(facts, host_plan["hardware"]), HOST)


def resolve_with_names(host_plan: dict[str, Any], names: dict[str, Any]) -> dict[str, Any]:
    """``resolve`` with names given (the host var gpufabric_nic_names: an image bake on a builder without the NICs)."""
    if not host_plan.get("hardware"):
        return host_plan
    unknown = sorted(set(names) - set(GROUPS))
    if unknown:
        raise ValueError(
            f"gpufabric_nic_names names {', '.join(unknown)}; accepted: gpu, management (lists of interface "
            "names), gpu_rdma (a list of RDMA device names)"
        )
    given: dict[str, list[str]] = {}
    for group in GROUPS:
        value = names.get(group) or []
        what, check, accepted = (
            ("RDMA device name", rdma_device_problem, RDMA_DEVICE_ACCEPTED)
            if group == "gpu_rdma"
            else ("interface name", interface_problem, INTERFACE_ACCEPTED)
        )
        if not isinstance(value, list):
            raise ValueError(f"gpufabric_nic_names.{group} {value!r} is not accepted; accepted: a list of {what}s")
        for index, name in enumerate(value):
            problem = check(name)
            if problem:
                raise ValueError(
                    f"gpufabric_nic_names.{group}[{index}] {name!r} is not an {what} ({problem}); accepted: {accepted}"
                )
        given[group] = list(value)
    return _named(host_plan, given, "gpufabric_nic_names gives")


def stand_in_names(nics: dict[str, Any]) -> dict[str, list[str]]:
    """Names for each NIC of the groups (``gpu0``, ..., ``mgmt0``, ...) where what is planned does not depend on the
    host's (``gpufabric plan``'s supply chain): never written to a host."""
    return {
        "gpu": [f"gpu{index}" for index in range(group_count(nics, "gpu"))],
        "management": [f"mgmt{index}" for index in range(group_count(nics, "management"))],
        "gpu_rdma": [f"rdma{index}" for index in range(group_count(nics, "gpu_rdma"))],
    }


# Linux takes 1 to 15 bytes (IFNAMSIZ 16 with the NUL) without '/', ':' or whitespace, and not "." or ".."
# (net/core/dev.c, dev_valid_name); gpufabric also keeps to ASCII letters, digits, '.', '_' and '-', since names
# go into comma-separated NCCL lists and file names.
INTERFACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
INTERFACE_ACCEPTED = (
    "1 to 15 bytes (Linux's IFNAMSIZ - 1) of ASCII letters, digits, '.', '_' and '-', starting with a letter or "
    "digit, e.g. eth1"
)


# RDMA device names: the kernel allows up to 63 bytes (IB_DEVICE_NAME_MAX 64); gpufabric keeps to the characters
# of interface names, as they go into the same comma-separated lists.
RDMA_DEVICE_ACCEPTED = (
    "1 to 63 bytes of ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, e.g. mlx5_0"
)


def rdma_device_problem(name: Any) -> str | None:
    """Why ``name`` is not accepted as an RDMA device name, or None."""
    return _name_problem(name, 63)


def interface_problem(name: Any) -> str | None:
    """Why ``name`` is not accepted as a network interface name, or None."""
    return _name_problem(name, 15)


def _name_problem(name: Any, max_bytes: int) -> str | None:
    if not isinstance(name, str):
        return "not text"
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return f"{size} bytes long"
    if not INTERFACE.fullmatch(name):
        return "empty" if not name else "holds a character outside the accepted ones"
    return None


def _named(host_plan: dict[str, Any], names: dict[str, list[str]], where: str) -> dict[str, Any]:
    resolved = copy.deepcopy(host_plan)
    nics = resolved["hardware"]["nics"]
    env = resolved.get("env") or {}
    errors = []
    for key in symbolic(env):
        env[key], missing = render(str(env[key]), names, nics)
        if missing:
            errors.append(f"{key} needs {', '.join(dict.fromkeys(missing))}")
    if errors:
        hint = "; fabric_facts' findings say which NICs are missing or not recognised" if where == HOST else ""
        raise ValueError(
            f"profile {resolved.get('profile')}: {'; '.join(errors)}, but {where} {_describe(names, nics)}{hint}"
        )
    # gpu_rdma only where the GPU NICs are ConnectX (their RDMA devices have names of the host's).
    groups = GROUPS if nics["gpu"]["kind"] in RDMA_GPU_KINDS else ("gpu", "management")
    resolved["nic_names"] = {group: list(names.get(group) or []) for group in groups}
    for group in ("gpu", "management"):
        resolved.setdefault("nics", {}).setdefault(group, {})["interfaces"] = list(names[group])
    return resolved
