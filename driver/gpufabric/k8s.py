# SPDX-License-Identifier: Apache-2.0
"""`gpufabric k8s manifests`: the Kubernetes side of the SR-IOV node path.

From the same plan the `sriov` role works from (each host's ``sriov`` layout and its
profile's GPU NICs), build the objects that hand the virtual functions to pods:

- the SR-IOV network device plugin config (ConfigMap ``sriovdp-config``, key ``config.json``),
  format from k8snetworkplumbingwg/sriov-network-device-plugin README "Config parameters"
  and pkg/types/types.go (ResourceConfig, NetDeviceSelectors);
- one NetworkAttachmentDefinition (k8s.cni.cncf.io/v1, NPWG multi-net-spec v1) per resource,
  InfiniBand: ib-sriov-cni with ``rdmaIsolation``; Ethernet: sriov-cni chained with rdma-cni;
- optionally an IPVLAN NetworkAttachmentDefinition for a storage interface;
- the admission policy that lets only labelled namespaces request the fabric's resources (k8s_policy), with
  ``--gatekeeper`` also as a Gatekeeper ConstraintTemplate and Constraint;
- a README that says what was generated for which hosts and how to use it.

Nothing here talks to a cluster; the files are applied with ``kubectl apply -f DIR``.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufabric import catalog as fabric_catalog
from gpufabric import k8s_policy, output_file
from gpufabric.collection import module_utils
from gpufabric.errors import UserError
from gpufabric.plan import fleet_plan

MELLANOX_VENDOR = "15b3"
# Virtual function device id per ConnectX physical function id (Linux drivers/net/ethernet/mellanox/mlx5/core/main.c,
# mlx5_core_pci_table: ConnectX-6 Dx and later use the generic "ConnectX Family mlx5Gen Virtual Function" 101e).
CONNECTX_VF_IDS = {
    "1017": "1018",  # ConnectX-5
    "1019": "101a",  # ConnectX-5 Ex
    "101b": "101c",  # ConnectX-6
    "101d": "101e",  # ConnectX-6 Dx
    "101f": "101e",  # ConnectX-6 Lx
    "1021": "101e",  # ConnectX-7
    "1023": "101e",  # ConnectX-8
}
VF_DRIVER = "mlx5_core"  # the PCI driver bound to mlx5 VFs, Ethernet and InfiniBand alike
# Values of the device plugin's "linkTypes" selector (README: "ether"; "infiniband" in its RDMA example).
LINK_TYPES = {"infiniband": "infiniband", "ethernet": "ether"}
# The CNI spec version the upstream examples of ib-sriov-cni, sriov-cni and rdma-cni use; every plugin here reads it.
CNI_VERSION = "0.3.1"
# Placeholders: IP ranges are site-specific. Flagged in every file that carries them and in the README.
PLACEHOLDER_IPAM_RANGE = "192.168.0.0/17"
PLACEHOLDER_STORAGE_RANGE = "192.168.128.0/17"
DEVICE_PLUGIN_CONFIGMAP = "sriovdp-config"
DEVICE_PLUGIN_NAMESPACE = "kube-system"
RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
NODE_LABEL = "gpufabric.io/profile"
STORAGE_NAD = "storage-ipvlan"

# Kubernetes names: DNS-1123 label (namespaces, NAD names per multi-net-spec 3.3) and subdomain (resource prefixes).
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Device plugin resource names: "should not contain special characters" (its README);
# sriov-network-operator's resourceName rule: ^[a-zA-Z0-9_]+$.
RESOURCE_NAME = re.compile(r"^[a-zA-Z0-9_]+$")


@dataclass(frozen=True)
class Options:
    """Command-line choices; every default is what `gpufabric k8s manifests --help` shows."""

    resource_prefix: str = "nvidia.com"
    namespace: str = "default"
    storage_interface: str | None = None
    ipam_range: str | None = None
    storage_ipam_range: str | None = None
    gatekeeper: bool = False


@dataclass
class Rail:
    """One device plugin resource and the NetworkAttachmentDefinition that consumes it."""

    resource_name: str
    nad_name: str
    physical_function: str | None  # PF netdev name where the profile names it (pfNames selector)
    ipam_range: str
    vfs: int = 0  # VFs across the fleet that take an address from ipam_range (one per pod interface at most)


@dataclass
class ProfileNetwork:
    """Everything generated for one profile of the fleet that carves VFs."""

    profile: str
    slug: str  # names: rdma-<slug> networks, rdma_vf_<slug> resources
    instance_type: str
    link_type: str  # infiniband | ethernet
    hosts: list[str]
    nics: int
    vfs_per_nic: int
    devices: list[str]  # VF device ids
    gpus: int
    rails: list[Rail] = field(default_factory=list)
    pod_env: dict[str, str] = field(default_factory=dict)
    pod_env_unset: list[str] = field(default_factory=list)

    @property
    def node_label(self) -> str:
        return self.profile.replace("/", ".")


def check_options(options: Options) -> None:
    """One clear error per bad option, before anything is built."""
    if not DNS_SUBDOMAIN.match(options.resource_prefix) or len(options.resource_prefix) > 253:
        raise UserError(
            f"--resource-prefix {options.resource_prefix!r} is not a DNS subdomain; accepted: lowercase letters, "
            "digits, '-' and '.', e.g. nvidia.com"
        )
    if options.resource_prefix == "kubernetes.io" or options.resource_prefix.endswith(".kubernetes.io"):
        raise UserError(f"--resource-prefix {options.resource_prefix!r} is reserved by Kubernetes; use your own domain")
    if not DNS_LABEL.match(options.namespace) or len(options.namespace) > 63:
        raise UserError(
            f"--namespace {options.namespace!r} is not a namespace name; accepted: up to 63 lowercase letters, "
            "digits and '-', starting and ending with a letter or digit"
        )
    fabric_nics = module_utils("fabric_nics")
    problem = None if options.storage_interface is None else fabric_nics.interface_problem(options.storage_interface)
    if problem:
        raise UserError(
            f"--storage-interface {options.storage_interface!r} is not a network interface name ({problem}); "
            f"accepted: {fabric_nics.INTERFACE_ACCEPTED}"
        )
    for flag, value in (("--ipam-range", options.ipam_range), ("--storage-ipam-range", options.storage_ipam_range)):
        if value is not None:
            _network(value, flag)
    if options.storage_ipam_range is not None and options.storage_interface is None:
        raise UserError("--storage-ipam-range needs --storage-interface (the IPVLAN storage network it addresses)")


def _network(value: str, flag: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise UserError(f"{flag} {value!r} is not a network in CIDR notation ({exc}); e.g. 10.10.0.0/16") from None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _rail_ranges(value: str, count: int, flag: str) -> list[str]:
    """Split one range into ``count`` equal subnets, one per rail (next power of two)."""
    network = _network(value, flag)
    if count == 1:
        return [str(network)]
    extra_bits = math.ceil(math.log2(count))
    new_prefix = network.prefixlen + extra_bits
    if network.max_prefixlen - new_prefix < 2:
        raise UserError(f"{flag} {value!r} is too small to split into {count} rail subnets; give a larger range")
    return [str(subnet) for subnet in list(network.subnets(new_prefix=new_prefix))[:count]]


def _vf_devices(pci_ids: list[str], profile: str) -> list[str]:
    if not pci_ids:
        # Without PF ids in the profile: every ConnectX VF id; vendor and link type still narrow the pool.
        return sorted(set(CONNECTX_VF_IDS.values()))
    devices = []
    for pci_id in pci_ids:
        vendor, _sep, device = pci_id.lower().partition(":")
        if vendor != MELLANOX_VENDOR or device not in CONNECTX_VF_IDS:
            raise UserError(
                f"profile {profile}: nics.gpu.pci_ids {pci_id!r} is not a ConnectX physical function this generator "
                f"knows the VF id of; accepted: {', '.join(f'{MELLANOX_VENDOR}:{pf}' for pf in CONNECTX_VF_IDS)}"
            )
        devices.append(CONNECTX_VF_IDS[device])
    return sorted(set(devices))


def networks(
    plan: dict[str, Any], catalog: Any, tier: str | None, options: Options, inventory: str
) -> list[ProfileNetwork]:
    """Group the fleet's SR-IOV hosts by profile and name their resources and networks."""
    by_profile: dict[str, list[str]] = {}
    for name, host in plan["hosts"].items():
        if host.get("sriov"):
            by_profile.setdefault(host["profile"], []).append(name)
    if not by_profile:
        at = f"tier {tier}" if tier else "their tier"
        raise UserError(
            f"inventory {inventory!r} has no host whose plan carves SR-IOV virtual functions at {at}; give the "
            "Kubernetes GPU nodes a profile with an `sriov:` section (e.g. gpufabric_profile: "
            "baremetal/hgx-h100-ib-ndr-sriov) at tier best; `gpufabric plan -i INVENTORY` shows each host's layout"
        )
    slugs = [_slug(catalog.profiles[name]["instance_type"]) for name in by_profile]
    use_profile_name = len(set(slugs)) != len(slugs)  # two profiles share an instance type: name by profile instead
    result = []
    for name, hosts in sorted(by_profile.items()):
        profile = catalog.profiles[name]
        first = plan["hosts"][hosts[0]]
        layout = first["sriov"]
        gpu_nics = first["nics"]["gpu"]
        slug = _slug(name if use_profile_name else profile["instance_type"])
        network = ProfileNetwork(
            profile=name,
            slug=slug,
            instance_type=profile["instance_type"],
            link_type=layout["link_type"],
            hosts=sorted(hosts),
            nics=layout["nics"],
            vfs_per_nic=layout["vfs_per_nic"],
            devices=_vf_devices(list(gpu_nics.get("pci_ids") or []), name),
            gpus=int(first["gpus"].get("count", 0)),
        )
        # Per rail where the plan names the host's PF netdevs (host var gpufabric_nic_names; the catalog has no
        # names): a pool spanning all HCAs may hand one pod several VFs of the same PF (one rail), so a multi-rail
        # pod asks for one VF from each rail's pool instead.
        interfaces = list(gpu_nics.get("interfaces") or [])
        per_rail = len(interfaces) == layout["nics"] and layout["nics"] > 1
        base_resource = "rdma_vf_" + slug.replace("-", "_")
        base_nad = f"rdma-{slug}"
        ipam = options.ipam_range or PLACEHOLDER_IPAM_RANGE
        layouts = [plan["hosts"][host]["sriov"] for host in network.hosts]
        if per_rail:
            ranges = _rail_ranges(ipam, len(interfaces), "--ipam-range")
            per_rail_vfs = sum(host_layout["vfs_per_nic"] for host_layout in layouts)  # one PF of each host per rail
            for index, (interface, subnet) in enumerate(zip(interfaces, ranges, strict=True)):
                network.rails.append(
                    Rail(f"{base_resource}_rail{index}", f"{base_nad}-rail{index}", interface, subnet, per_rail_vfs)
                )
        else:
            all_vfs = sum(host_layout["vfs"] for host_layout in layouts)
            network.rails.append(Rail(base_resource, base_nad, None, str(_network(ipam, "--ipam-range")), all_vfs))
        for rail in network.rails:
            if not RESOURCE_NAME.match(rail.resource_name) or len(rail.resource_name) > 63:
                raise UserError(f"profile {name}: resource name {rail.resource_name!r} is not usable; shorten the name")
            if not DNS_LABEL.match(rail.nad_name) or len(rail.nad_name) > 63:
                raise UserError(f"profile {name}: network name {rail.nad_name!r} is longer than 63 characters")
        tier_name = first["tier"]
        tier_data = profile["tiers"][tier_name]
        env = dict(tier_data["env"])
        for key, value in (tier_data.get("k8s_env") or {}).items():
            if value is None:
                env.pop(key, None)
                network.pod_env_unset.append(key)
            else:
                env[key] = value
        network.pod_env = env
        result.append(network)
    _check_overlap(result)
    return result


def layout_warnings(result: list[ProfileNetwork], plan: dict[str, Any]) -> list[str]:
    """Hosts of one profile whose VF layouts differ: the files and the README describe the first host's."""
    warnings = []
    for network in result:
        shapes = {
            host: (plan["hosts"][host]["sriov"]["nics"], plan["hosts"][host]["sriov"]["vfs_per_nic"])
            for host in network.hosts
        }
        if len(set(shapes.values())) > 1:
            listed = ", ".join(f"{host} {nics} PFs x {vfs} VFs" for host, (nics, vfs) in shapes.items())
            warnings.append(
                f"profile {network.profile}: its hosts differ in their VF layout ({listed}); the README and the pod "
                f"snippet show {network.hosts[0]}'s; give them the same sriov_num_vfs and sriov_physical_functions"
            )
    return warnings


def _usable(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> int:
    """Addresses whereabouts can hand out: the range less its first and last address (network, broadcast)."""
    return max(network.num_addresses - 2, 0)


def range_warnings(result: list[ProfileNetwork], options: Options) -> list[str]:
    """Ranges that cannot work: too few addresses for the VFs they must address, or overlapping ranges.

    whereabouts keeps one address pool per range: rails of different profiles with the very same range share it
    (their VFs add up); two different ranges that overlap are two pools that can hand out the same address.
    """
    source = "--ipam-range" if options.ipam_range else f"the placeholder range {PLACEHOLDER_IPAM_RANGE}"
    pools: dict[ipaddress.IPv4Network | ipaddress.IPv6Network, list[Rail]] = {}
    for network in result:
        for rail in network.rails:
            pools.setdefault(ipaddress.ip_network(rail.ipam_range), []).append(rail)
    warnings = []
    for subnet, rails in pools.items():
        needed = sum(rail.vfs for rail in rails)
        if needed > _usable(subnet):
            users = ", ".join(rail.nad_name for rail in rails)
            warnings.append(
                f"{source} gives {users} the range {subnet}: {_usable(subnet)} addresses for {needed} VFs; "
                "give a larger range"
            )
    named = [(", ".join(rail.nad_name for rail in rails), subnet) for subnet, rails in pools.items()]
    if options.storage_interface:
        storage = options.storage_ipam_range or PLACEHOLDER_STORAGE_RANGE
        named.append((STORAGE_NAD, ipaddress.ip_network(storage)))
    for index, (first_name, first) in enumerate(named):
        for second_name, second in named[index + 1 :]:
            if first.version == second.version and first.overlaps(second):
                warnings.append(
                    f"{first} ({first_name}) overlaps {second} ({second_name}): whereabouts keeps one pool per "
                    "range, so both can hand out the same address; give ranges that do not overlap"
                )
    return warnings


def _check_overlap(result: list[ProfileNetwork]) -> None:
    """Two profiles whose pools would select the same VFs: the device plugin cannot tell them apart."""
    for index, first in enumerate(result):
        for second in result[index + 1 :]:
            same_link = first.link_type == second.link_type
            same_device = bool(set(first.devices) & set(second.devices))
            first_pfs = {rail.physical_function for rail in first.rails}
            second_pfs = {rail.physical_function for rail in second.rails}
            pf_overlap = None in first_pfs or None in second_pfs or bool(first_pfs & second_pfs)
            if same_link and same_device and pf_overlap:
                shared = ", ".join(sorted(set(first.devices) & set(second.devices)))
                raise UserError(
                    f"profiles {first.profile} and {second.profile} would select the same virtual functions "
                    f"(vendor {MELLANOX_VENDOR}, devices {shared}, "
                    f"link type {first.link_type}) in one cluster-wide device plugin config; generate for one node "
                    "pool at a time (an inventory per pool) and give each pool its own sriovdp-config"
                )


# --- rendering -----------------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (embedded JSON) as literal blocks, so the files read like the upstream examples."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def _yaml(documents: list[dict[str, Any]]) -> str:
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000)


def _json(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"


def device_plugin_config(result: list[ProfileNetwork], options: Options) -> dict[str, Any]:
    """The device plugin's config.json: one resource per profile, or per rail."""
    resources = []
    for network in result:
        for rail in network.rails:
            selectors: dict[str, Any] = {
                "vendors": [MELLANOX_VENDOR],
                "devices": network.devices,
                "drivers": [VF_DRIVER],
            }
            if rail.physical_function:
                selectors["pfNames"] = [rail.physical_function]
            selectors["linkTypes"] = [LINK_TYPES[network.link_type]]
            selectors["isRdma"] = True
            resources.append(
                {"resourcePrefix": options.resource_prefix, "resourceName": rail.resource_name, "selectors": selectors}
            )
    return {"resourceList": resources}


def cni_config(network: ProfileNetwork, rail: Rail) -> dict[str, Any]:
    """The CNI config of one attachment: exclusive RDMA (the VF's RDMA device moves into the pod's namespace)."""
    ipam = {"type": "whereabouts", "range": rail.ipam_range}
    if network.link_type == "infiniband":
        # ib-sriov-cni: rdmaIsolation does what rdma-cni does (its README: then do not chain rdma-cni).
        return {
            "cniVersion": CNI_VERSION,
            "name": rail.nad_name,
            "type": "ib-sriov",
            "rdmaIsolation": True,
            "ipam": ipam,
        }
    return {
        "cniVersion": CNI_VERSION,
        "name": rail.nad_name,
        "plugins": [{"type": "sriov", "ipam": ipam}, {"type": "rdma"}],
    }


def storage_config(interface: str, ipam_range: str) -> dict[str, Any]:
    return {
        "cniVersion": CNI_VERSION,
        "name": STORAGE_NAD,
        "type": "ipvlan",
        "master": interface,
        "mode": "l2",
        "ipam": {"type": "whereabouts", "range": ipam_range},
    }


def _nad(name: str, namespace: str, config: dict[str, Any], resource: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource:
        metadata["annotations"] = {RESOURCE_ANNOTATION: resource}
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": metadata,
        "spec": {"config": _json(config)},
    }


def _header(inventory: str, lines: list[str]) -> str:
    text = [f"# Generated by `gpufabric k8s manifests -i {inventory}`; regenerate instead of editing."]
    text += [f"# {line}" for line in lines]
    return "\n".join(text) + "\n---\n"


def manifests(
    result: list[ProfileNetwork], options: Options, inventory: str, warnings: Sequence[str] = ()
) -> dict[str, str]:
    """File name -> text; kubectl applies the .yaml files in name order, the README is left alone."""
    files: dict[str, str] = {}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": DEVICE_PLUGIN_CONFIGMAP, "namespace": DEVICE_PLUGIN_NAMESPACE},
        "data": {"config.json": _json(device_plugin_config(result, options))},
    }
    files["00-sriovdp-config.yaml"] = _header(
        inventory,
        [
            "SR-IOV network device plugin config (k8snetworkplumbingwg/sriov-network-device-plugin); its DaemonSet",
            "mounts key config.json of this ConfigMap at /etc/pcidp/config.json.",
        ],
    ) + _yaml([configmap])
    placeholder = options.ipam_range is None
    for network in result:
        documents = []
        for rail in network.rails:
            resource = f"{options.resource_prefix}/{rail.resource_name}"
            documents.append(_nad(rail.nad_name, options.namespace, cni_config(network, rail), resource))
        lines = [f"{network.profile}: {len(network.rails)} network(s) for hosts {', '.join(network.hosts)}."]
        if placeholder:
            lines.append(
                f"SITE-SPECIFIC: the whereabouts range {PLACEHOLDER_IPAM_RANGE} is a placeholder; "
                "regenerate with --ipam-range CIDR."
            )
        files[f"10-nad-rdma-{network.slug}.yaml"] = _header(inventory, lines) + _yaml(documents)
    if options.storage_interface:
        storage_range = options.storage_ipam_range or PLACEHOLDER_STORAGE_RANGE
        lines = [f"IPVLAN (l2) storage network on host interface {options.storage_interface}."]
        if options.storage_ipam_range is None:
            lines.append(
                f"SITE-SPECIFIC: the whereabouts range {PLACEHOLDER_STORAGE_RANGE} is a placeholder; "
                "regenerate with --storage-ipam-range CIDR."
            )
        storage = _nad(STORAGE_NAD, options.namespace, storage_config(options.storage_interface, storage_range), None)
        files[f"20-nad-{STORAGE_NAD}.yaml"] = _header(inventory, lines) + _yaml([storage])
    resources = resource_names(result, options)
    policy_lines = [
        f"Only namespaces labelled {k8s_policy.ACCESS_LABEL}={k8s_policy.ACCESS_VALUE} may run pods that request",
        "the fabric's resources (ValidatingAdmissionPolicy, Kubernetes 1.30 or later).",
    ]
    files["30-admission-policy.yaml"] = _header(inventory, policy_lines) + _yaml(k8s_policy.admission_policy(resources))
    if options.gatekeeper:
        # Two files: the Constraint's kind exists only once Gatekeeper has made the template's CRD.
        files["31-gatekeeper-template.yaml"] = _header(
            inventory, ["The same rule for OPA Gatekeeper: apply before 32-gatekeeper-constraint.yaml."]
        ) + _yaml([k8s_policy.gatekeeper_template()])
        files["32-gatekeeper-constraint.yaml"] = _header(
            inventory, [f"Gatekeeper Constraint of kind {k8s_policy.GATEKEEPER_KIND} (after its template)."]
        ) + _yaml([k8s_policy.gatekeeper_constraint(resources)])
    files["README.md"] = readme(result, options, inventory, sorted(files), warnings)
    return files


def resource_names(result: list[ProfileNetwork], options: Options) -> list[str]:
    """Every device plugin resource of the fleet, as pods request it (PREFIX/NAME)."""
    return sorted({f"{options.resource_prefix}/{rail.resource_name}" for network in result for rail in network.rails})


def pod_snippet(network: ProfileNetwork, options: Options) -> dict[str, Any]:
    """A pod that takes one VF per GPU NIC, as the README shows it."""
    if len(network.rails) > 1:
        attachments = [rail.nad_name for rail in network.rails]
        limits: dict[str, Any] = {f"{options.resource_prefix}/{rail.resource_name}": 1 for rail in network.rails}
    else:
        rail = network.rails[0]
        attachments = [rail.nad_name] * network.nics  # one interface (one VF) per listed attachment
        limits = {f"{options.resource_prefix}/{rail.resource_name}": network.nics}
    if options.storage_interface:
        attachments.append(STORAGE_NAD)
    if network.gpus:
        limits = {"nvidia.com/gpu": network.gpus, **limits}
    container: dict[str, Any] = {
        "name": "worker",
        "image": "REPLACE-WITH-YOUR-NCCL-IMAGE",
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "resources": {"limits": limits},
    }
    if network.pod_env:
        container["env"] = [{"name": key, "value": value} for key, value in network.pod_env.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"nccl-{_slug(network.instance_type)}"[:63].rstrip("-"),
            "namespace": options.namespace,
            "annotations": {NETWORKS_ANNOTATION: ",".join(attachments)},
        },
        "spec": {"nodeSelector": {NODE_LABEL: network.node_label}, "containers": [container]},
    }


def readme(
    result: list[ProfileNetwork],
    options: Options,
    inventory: str,
    file_names: list[str],
    warnings: Sequence[str] = (),
) -> str:
    out: list[str] = []
    add = out.append
    add("# SR-IOV Kubernetes manifests\n")
    add(f"Generated by `gpufabric k8s manifests -i {inventory}` from the same plan the `sriov` role applies")
    add("(`gpufabric plan -i INVENTORY` shows the VF layout per host). Regenerate instead of editing.\n")
    if warnings:
        add("## Warnings\n")
        out.extend(f"- **WARNING:** {warning}" for warning in warnings)
        add("")
    add("## What was generated\n")
    add("| file | objects |")
    add("|---|---|")
    for name in file_names:
        if name == "00-sriovdp-config.yaml":
            configmap = f"{DEVICE_PLUGIN_NAMESPACE}/{DEVICE_PLUGIN_CONFIGMAP}"
            add(f"| `{name}` | ConfigMap `{configmap}` (device plugin `config.json`) |")
        elif name.startswith("20-nad-"):
            add(f"| `{name}` | NetworkAttachmentDefinition `{options.namespace}/{STORAGE_NAD}` (IPVLAN storage) |")
        elif name == "30-admission-policy.yaml":
            add(f"| `{name}` | ValidatingAdmissionPolicy and binding `{k8s_policy.POLICY_NAME}` |")
        elif name == "31-gatekeeper-template.yaml":
            add(f"| `{name}` | Gatekeeper ConstraintTemplate `{k8s_policy.GATEKEEPER_KIND.lower()}` |")
        elif name == "32-gatekeeper-constraint.yaml":
            add(f"| `{name}` | Gatekeeper Constraint `{k8s_policy.POLICY_NAME}` |")
        else:
            add(f"| `{name}` | NetworkAttachmentDefinition(s) in namespace `{options.namespace}` |")
    add("")
    for network in result:
        add(f"### {network.profile}\n")
        add(f"- hosts: {', '.join(network.hosts)}")
        add(
            f"- {network.nics} GPU-network ConnectX PFs x {network.vfs_per_nic} VFs = "
            f"{network.nics * network.vfs_per_nic} VFs per host, link type {network.link_type}, "
            f"VF device id(s) {', '.join(network.devices)}"
        )
        if len(network.rails) > 1:
            add("- one resource and one network per rail (the profile names its PF netdevs), so a pod that asks for")
            add("  one VF of each rail gets one VF on every HCA:")
        else:
            add("- one resource for all rails: the plan names no PF netdevs (`nics.gpu.interfaces`), so the")
            add("  device plugin cannot tell the rails apart. A pod asking for several VFs may get two VFs of the")
            add("  same HCA (one rail). Name the PFs per host (host var `gpufabric_nic_names`, `gpu` in PCI order)")
            add("  to get one pool per rail.")
        add("")
        add("| resource | network (NAD) | PF | whereabouts range |")
        add("|---|---|---|---|")
        for rail in network.rails:
            add(
                f"| `{options.resource_prefix}/{rail.resource_name}` | `{rail.nad_name}` | "
                f"{rail.physical_function or 'all (by PCI id)'} | `{rail.ipam_range}` |"
            )
        add("")
    if options.ipam_range is None:
        add(f"**SITE-SPECIFIC:** the whereabouts range `{PLACEHOLDER_IPAM_RANGE}` is a placeholder chosen so that it")
        add("is obviously not yours; regenerate with `--ipam-range CIDR` (split into one subnet per rail).")
        add("whereabouts (not host-local) because host-local allocates per node and would hand two nodes the same")
        add("address.\n")
    if options.storage_interface and options.storage_ipam_range is None:
        add(f"**SITE-SPECIFIC:** the storage range `{PLACEHOLDER_STORAGE_RANGE}` is a placeholder; regenerate with")
        add("`--storage-ipam-range CIDR`.\n")
    add("## Before applying\n")
    add("1. The hosts run the `sriov` role (`gpufabric apply` / playbooks/site.yml at tier best): it creates the VFs")
    add("   and installs `gpufabric-sriov.service`, which re-creates them at boot before kubelet starts.")
    add("2. The cluster runs Multus, the SR-IOV network device plugin DaemonSet (upstream")
    add("   `deployments/sriovdp-daemonset.yaml`, which reads this ConfigMap), the CNI plugins named in the")
    add("   networks (" + ", ".join(sorted(_cni_types(result, options))) + ") and the whereabouts IPAM plugin,")
    add("   each at a pinned version.")
    add("3. Label the nodes, so pods and (if you restrict it) the device plugin DaemonSet land on them:\n")
    add("```sh")
    for network in result:
        for host in network.hosts:
            add(f"kubectl label node {host} {NODE_LABEL}={network.node_label} --overwrite")
    add("```\n")
    add("Node names are assumed to equal the inventory host names; adjust where they differ.\n")
    add("## Apply\n")
    add("```sh")
    add("kubectl apply -f .   # kubectl reads the .yaml files only; the device plugin rereads its config on restart:")
    add("kubectl -n kube-system rollout restart daemonset -l app=sriovdp")
    add("kubectl get node NODE -o jsonpath='{.status.allocatable}'   # shows the resources below")
    add("```\n")
    add("## Who may use the fabric\n")
    names = ", ".join(f"`{name}`" for name in resource_names(result, options))
    add(f"`30-admission-policy.yaml` refuses a pod whose containers request or limit {names}")
    add(f"or any `{k8s_policy.RDMA_SHARED_PREFIX}*` resource (the RDMA shared device plugin's prefix), unless its")
    add(f"namespace carries the label `{k8s_policy.ACCESS_LABEL}={k8s_policy.ACCESS_VALUE}`. It needs Kubernetes")
    add("1.30 or later (ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1). Grant a namespace:\n")
    add("```sh")
    add(f"kubectl label namespace {options.namespace} {k8s_policy.ACCESS_LABEL}={k8s_policy.ACCESS_VALUE}")
    add("```\n")
    add("The label is the grant: keep `patch` on namespaces for cluster administrators (RBAC), or any namespace")
    add("owner can grant itself the fabric. The NetworkAttachmentDefinitions live in namespace")
    add(f"`{options.namespace}`, so label at least that one.")
    if options.gatekeeper:
        add("With Gatekeeper, apply `31-gatekeeper-template.yaml`, wait until its CRD exists")
        add(f"(`kubectl get crd {k8s_policy.GATEKEEPER_KIND.lower()}.constraints.gatekeeper.sh`), then")
        add("`32-gatekeeper-constraint.yaml`; one of the two policies is enough.")
    add("")
    add("## RDMA modes: exclusive (these manifests) or shared\n")
    add("- **Exclusive** (one VF per pod interface, RDMA device isolated in the pod's network namespace): the host's")
    add("  RDMA subsystem must be in exclusive netns mode, `rdma system set netns exclusive` (persist with")
    add("  `options ib_core netns_mode=0` in /etc/modprobe.d/; the kernel only changes the mode while no other")
    add("  network namespaces exist, so set it at boot). InfiniBand networks use ib-sriov-cni with")
    add("  `rdmaIsolation: true` (then rdma-cni must not be chained); Ethernet (RoCE) networks chain sriov-cni with")
    add("  the rdma meta plugin (rdma-cni).")
    add("- **Shared** (no VFs: pods share the PF's RDMA device): the Mellanox k8s-rdma-shared-dev-plugin with the")
    add("  RDMA subsystem in its default shared mode. No isolation between pods; not generated here.\n")
    add("## Pod\n")
    add("Request the resources, list the networks in the annotation (one interface per entry), and add IPC_LOCK")
    add("(RDMA pins memory; sriov-network-device-plugin docs/rdma). The environment is the profile's tier")
    add("environment with its `k8s_env` applied:\n")
    for network in result:
        add(f"### {network.profile}\n")
        add("```yaml")
        add(_yaml([pod_snippet(network, options)]).rstrip())
        add("```\n")
        if network.pod_env_unset:
            add(f"Unset in pods (`k8s_env` null): {', '.join(network.pod_env_unset)}.\n")
    add("## Sources\n")
    add(
        "- k8snetworkplumbingwg/sriov-network-device-plugin: README (Config parameters, selectors), pkg/types/types.go,"
    )
    add("  deployments/configMap.yaml and sriovdp-daemonset.yaml, docs/rdma (IPC_LOCK).")
    add(
        "- k8snetworkplumbingwg/multi-net-spec v1 and network-attachment-definition-client artifacts/networks-crd.yaml."
    )
    add("- k8snetworkplumbingwg/ib-sriov-cni README (rdmaIsolation), rdma-cni README and examples/rdma_net_crd.yaml.")
    add("- containernetworking/cni SPEC.md (network configuration: cniVersion, name, type / plugins).")
    return "\n".join(out) + "\n"


def _cni_types(result: list[ProfileNetwork], options: Options) -> set[str]:
    types = {"ib-sriov" if network.link_type == "infiniband" else "sriov + rdma" for network in result}
    if options.storage_interface:
        types.add("ipvlan")
    return types


# --- writing -------------------------------------------------------------------------------------------------


# The list of the files gpufabric wrote in -o DIR (kubectl apply -f DIR skips it: no .yaml/.json).
MARKER = ".gpufabric-manifests"
MARKER_HEADER = "# Files `gpufabric k8s manifests` wrote here; --force replaces these and nothing else.\n"


def _written_here(directory: Path) -> set[str]:
    """The names DIR's marker lists (with the marker itself): what an earlier run wrote there."""
    marker = directory / MARKER
    if marker.is_symlink() or not marker.is_file():
        return set()
    try:
        lines = marker.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    names = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    return {name for name in names if "/" not in name and name not in (".", "..")} | {MARKER}


def check_output(directory: Path, force: bool) -> None:
    """-o DIR, before any work: a directory gpufabric can create or replace (not a file, a link, or
    under a file). A non-empty one is replaced only with --force, and only when every entry in it is
    a file an earlier run wrote (its marker lists it): an unrelated file is never removed."""
    output_file.check_directory(directory, "-o", replaced=True)
    if not directory.is_dir():
        return
    present = sorted(path.name for path in directory.iterdir())
    if not present:
        return
    ours = _written_here(directory)
    foreign = [
        name
        for name in present
        if name not in ours or (directory / name).is_symlink() or not (directory / name).is_file()
    ]
    if foreign:
        raise UserError(
            f"-o {directory}: directory is not empty and holds {foreign[0]}, which gpufabric did not write "
            f"(its {MARKER} does not list it); --force replaces only files gpufabric wrote: remove it yourself "
            "or give another directory"
        )
    if not force:
        raise UserError(f"-o {directory}: directory is not empty; pass --force to replace its contents")


def write_tree(directory: Path, files: dict[str, str], force: bool) -> list[Path]:
    """Write every file and the marker into a staging directory, then move it into place: no
    half-written DIR on error. check_output says which DIR is accepted."""
    check_output(directory, force)
    occupied = directory.is_dir() and any(directory.iterdir())
    files = {**files, MARKER: MARKER_HEADER + "".join(f"{name}\n" for name in sorted(files))}
    parent = directory.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{directory.name}.new-"))
    except OSError as exc:
        raise UserError(f"-o {directory}: cannot create it ({exc.strerror or exc})") from None
    try:
        for name, text in files.items():
            path = staging / name
            path.write_text(text, encoding="utf-8")
            path.chmod(0o644)
        staging.chmod(0o755)
        if occupied:
            old = Path(tempfile.mkdtemp(dir=parent, prefix=f".{directory.name}.old-"))
            os.replace(directory, old)  # rename(2) onto the empty directory just made
            try:
                os.replace(staging, directory)
            except OSError:
                os.replace(old, directory)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, directory)  # an absent or empty DIR is replaced in one rename
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"-o {directory}: cannot write it ({exc.strerror or exc}); nothing was changed") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [directory / name for name in files if name != MARKER]


def as_dict(
    directory: Path, written: list[Path], result: list[ProfileNetwork], options: Options, warnings: Sequence[str]
) -> dict[str, Any]:
    """`gpufabric k8s manifests --json` (docs/kubernetes.md, "JSON"): the files written and what they hold."""
    return {
        "output": str(directory),
        "files": [str(path) for path in written],
        "namespace": options.namespace,
        "resource_prefix": options.resource_prefix,
        "placeholder_ranges": options.ipam_range is None
        or (options.storage_interface is not None and options.storage_ipam_range is None),
        "warnings": list(warnings),
        "storage": {
            "interface": options.storage_interface,
            "ipam_range": options.storage_ipam_range or PLACEHOLDER_STORAGE_RANGE,
        }
        if options.storage_interface
        else None,
        "hosts": sum(len(network.hosts) for network in result),
        "admission": {
            "label": f"{k8s_policy.ACCESS_LABEL}={k8s_policy.ACCESS_VALUE}",
            "resources": resource_names(result, options),
            "prefixes": [k8s_policy.RDMA_SHARED_PREFIX],
            "gatekeeper": options.gatekeeper,
        },
        "profiles": [
            {
                "profile": network.profile,
                "instance_type": network.instance_type,
                "link_type": network.link_type,
                "hosts": list(network.hosts),
                "nics": network.nics,
                "vfs_per_nic": network.vfs_per_nic,
                "rails": [
                    {
                        "resource": f"{options.resource_prefix}/{rail.resource_name}",
                        "network": rail.nad_name,
                        "physical_function": rail.physical_function,
                        "ipam_range": rail.ipam_range,
                        "vfs": rail.vfs,
                    }
                    for rail in network.rails
                ],
            }
            for network in result
        ],
    }


def _stderr_warning(text: str) -> None:
    sys.stderr.write(f"warning: {text}\n")


def generate(
    inventory: str,
    tier: str | None,
    catalog_files: list[Path] | None,
    options: Options,
    warn: Callable[[str], None] = _stderr_warning,
) -> tuple[list[ProfileNetwork], dict[str, str]]:
    """Plan the fleet and build every file (nothing written yet).

    Every host's SR-IOV variables pass the sriov role's own check (through the plan); what would make the files
    wrong without being an error (too few addresses, overlapping ranges, hosts that differ) is given to ``warn``
    and written into the README.
    """
    check_options(options)
    plan = fleet_plan(inventory, tier, catalog_files)
    catalog = fabric_catalog.load(catalog_files)
    result = networks(plan, catalog, tier, options, inventory)
    warnings = [*layout_warnings(result, plan), *range_warnings(result, options)]
    for warning in warnings:
        warn(warning)
    return result, manifests(result, options, inventory, warnings)
