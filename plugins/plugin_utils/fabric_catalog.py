# SPDX-License-Identifier: Apache-2.0
"""Load, merge and validate the fabric catalog.

The catalog is the single source of truth shared by the Python driver and the
Ansible side (lookup plugins, roles). This file depends on PyYAML and jsonschema
only (requirements.txt), so both can import it: the driver through the collection
on disk, Ansible through
``ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_catalog``.
It runs only on the controller (plugin_utils: Ansible never ships it to hosts), where
PyYAML comes with ansible-core; it is imported only where a catalog file is read.

A catalog file holds ``profiles:`` (one per instance type), ``fabrics:`` (what follows from the
fabric: the roles in order, the standard tier, the env the fabric's NCCL plugin requires or forbids,
the vendor's guest-config constraints) and ``images:`` (a cloud's own GPU image, or a site's golden
image: its OS, and which host-stack roles adopt the stack it ships instead of installing their own).
A profile inherits its fabric's tiers and overrides them; the loader records where each resolved value
came from (``Catalog.provenance``).

The shape of each entry is JSON Schema, checked by jsonschema; its errors are put
in the catalog's words so that every error names the file, the key path, the bad
value and what is accepted, in one sentence an operator reads. What a schema cannot
say (the profile's name against its cloud and instance type, NVLink domains of whole
hosts, NCCL floors, roles against their fabric) is checked in Python after it.

Catalog values end up in files on hosts: /etc/nccl.conf, a profile.d script,
systemd units, udev rules, shell scripts. So every string in a profile is one
line of printable text, and the values that name things on a host (profile,
instance type, interfaces, RDMA devices, environment variables) follow a strict
grammar, checked here at load time, before any role templates them.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import jsonschema
except ImportError as exc:  # an execution environment built without requirements.txt: one clear error on load
    jsonschema = None
    JSONSCHEMA_IMPORT_ERROR: ImportError | None = exc
else:
    JSONSCHEMA_IMPORT_ERROR = None

from ansible_collections.gpufabric.cluster.plugins.module_utils import fabric_nics, host_tuning, nccl
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.bounded_yaml import YAMLFileError, load_file

BUILTIN_CATALOG_DIR = Path(__file__).resolve().parents[2] / "catalog"
CATALOG_ENV_VAR = "GPUFABRIC_CATALOG"

CLOUDS = ("gcp", "aws", "azure", "nebius", "oci", "baremetal")
FABRICS = ("tcpx", "tcpxo", "gpudirect_rdma", "infiniband", "efa", "roce", "none")
TIERS = ("best", "standard")
NIC_KINDS = ("gvnic", "efa", "connectx_ib", "connectx_roce", "ethernet")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
ALGOS = ("default", "ring")
# Every role a profile may name; the plan reports which of them exist yet.
KNOWN_ROLES = (
    "fabric_facts",
    "rdma_stack",
    "nvidia_driver",
    "gcp_tcpx",
    "gcp_tcpxo",
    "gcp_gpudirect_rdma",
    "infiniband",
    "aws_efa",
    "roce",
    "sriov",
    "host_tuning",
    "imex",
    "nccl",
    "nccl_env",
    "nccl_tests",
    "gds",
)

# The host-stack roles that can adopt what an image ships (their <role>_provision: install or adopt); an image's
# `adopt:` names some of them. tests/unit/test_role_contracts.py holds each to its mode variable.
ADOPTING_ROLES = ("nvidia_driver", "rdma_stack", "aws_efa", "gcp_gpudirect_rdma", "nccl", "gds")
# The operating systems an image runs: gpufabric_os's values (driver/gpufabric/os_targets.py holds their facts).
OS_NAMES = ("ubuntu-22.04", "ubuntu-24.04", "debian-12", "debian-13", "rhel-9")
# A profile's CPU architecture, as Debian and the clouds name it (default amd64). Grace hosts (GB200, GB300) are
# arm64, where NVIDIA's CUDA repository directory is sbsa; ANSIBLE_ARCHITECTURE gives what Ansible's facts say.
ARCHITECTURES = ("amd64", "arm64")
DEFAULT_ARCHITECTURE = "amd64"
ANSIBLE_ARCHITECTURE = {"amd64": "x86_64", "arm64": "aarch64"}

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
PCI_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{4}$")
# Names that reach hosts unquoted (unit files, udev rules, shell word lists): letters, digits, '.', '_', '-'.
INSTANCE_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PROFILE_NAME = re.compile(r"^[a-z]+/[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RDMA_DEVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# NCCL reads /etc/nccl.conf lines into 1024-byte buffers: a longer value would be cut without a word.
ENV_VALUE_MAX_BYTES = 1023


class CatalogError(Exception):
    """A catalog file is unreadable or does not match the schema."""

    def __init__(self, source: str, key: str, reason: str) -> None:
        self.source = source
        self.key = key
        self.reason = reason
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(where + reason)


# ---------------------------------------------------------------------------
# Schema: JSON Schema (checked by jsonschema), with the catalog's own words for each error.
#
# Beside the standard keywords, a schema node may carry (jsonschema ignores them; _reason reads them):
#   x-must      the reason when the node's value is wrong, e.g. "must be an integer >= 1"
#               ("{value}" and "{type}" stand for the bad value and its type)
#   x-accepted  what a string must look like: "'<value>' is not accepted; accepted: <x-accepted>"
#   x-messages  the reason per failing keyword (minItems, uniqueItems, ...), before x-must
#   x-in-mapping  a mapping's value: the error names the key at the mapping's path ("NAME must be ...")
# An enum's reason lists its values. Unknown and missing keys name the key and what is accepted.
# ---------------------------------------------------------------------------


def _repr(value: Any) -> str:
    """A value as an error shows it: its repr, cut short (a mapping where a name belongs can be long)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _text_schema(must: str = "must be a non-empty string") -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "x-must": must}


def _int_min(low: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": low, "x-must": f"must be an integer >= {low}"}


def _choice(choices: tuple[str, ...]) -> dict[str, Any]:
    return {"enum": list(choices)}


def _matches(pattern: re.Pattern[str], accepted: str) -> dict[str, Any]:
    return {"type": "string", "pattern": pattern.pattern, "x-accepted": accepted}


def _must_match(pattern: re.Pattern[str], must: str) -> dict[str, Any]:
    return {"type": "string", "pattern": pattern.pattern, "x-must": must}


def _list_of(item: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "array", "items": item, **extra}


def _in_mapping(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "x-in-mapping": True}


def _mapping(fields: dict[str, tuple[dict[str, Any], bool]]) -> dict[str, Any]:
    """A mapping of exactly these keys: {key: (schema, required)}. Unknown keys first, then missing, then values."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [key for key, (_schema, required) in fields.items() if required],
        "properties": {key: schema for key, (schema, _required) in fields.items()},
    }


_TEXT = _text_schema()
_POSITIVE_NUMBER = {
    "type": "number",
    "exclusiveMinimum": 0,
    "x-must": "must be a positive number (not NaN or infinite)",
}
_BOOL = {"type": "boolean", "x-must": "must be true or false"}
_INSTANCE_TYPE = _matches(INSTANCE_TYPE, "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
_RDMA_DEVICE = _matches(RDMA_DEVICE, "an RDMA device name: 1-64 letters, digits, '.', '_' or '-'")
_PCI_ID = _must_match(PCI_ID, "must be a PCI vendor:device id such as '15b3:1021' (lowercase hex, quoted)")
_ENV_NAME = _must_match(ENV_NAME, f"variable name {{value}} must match {ENV_NAME.pattern}")
_ROLES = _list_of(
    _choice(KNOWN_ROLES),
    minItems=1,
    uniqueItems=True,
    **{"x-messages": {"minItems": "must name at least one role", "uniqueItems": "names a role twice"}},
)


def _env(allow_null: bool) -> dict[str, Any]:
    """VARIABLE: value (a number is fine: YAML reads 4 as one; validate_* make it a string)."""
    return {
        "type": "object",
        "x-must": "must be a mapping of VARIABLE: value",
        "propertyNames": _ENV_NAME,
        "additionalProperties": _in_mapping(
            {
                "type": ["string", "integer", "number", *(["null"] if allow_null else [])],
                "x-must": "must be a string (quote it); got {type}",
            }
        ),
    }


def _check_tier_env_lengths(entry: dict[str, Any], path: str, source: str) -> None:
    """NCCL reads /etc/nccl.conf lines into 1024-byte buffers: a byte count, which JSON Schema cannot express."""
    for tier_name, tier in entry["tiers"].items():
        for key in ("env", "k8s_env"):
            for name, setting in tier.get(key, {}).items():
                if setting is not None and len(str(setting).encode("utf-8")) > ENV_VALUE_MAX_BYTES:
                    raise CatalogError(
                        source,
                        f"{path}.tiers.{tier_name}.{key}",
                        f"{name} value is longer than {ENV_VALUE_MAX_BYTES} bytes, the most /etc/nccl.conf holds",
                    )


THRESHOLD_SCHEMA = _mapping(
    {
        "collective": (_choice(COLLECTIVES), True),
        "min_nodes": (_int_min(1), True),
        "max_nodes": (_int_min(1), False),
        "algo": (_choice(ALGOS), True),
        "min_size_bytes": (_int_min(1), True),
        "min_busbw_gbyte_s": (_POSITIVE_NUMBER, True),
        "verified": (_BOOL, True),
        "basis": (_TEXT, True),
    }
)
_THRESHOLDS = _list_of(THRESHOLD_SCHEMA, minItems=1, **{"x-must": "must be a non-empty list of thresholds"})

TIER_SCHEMA = _mapping(
    {
        "roles": (_ROLES, True),
        "env": (_env(allow_null=False), True),
        "k8s_env": (_env(allow_null=True), False),
    }
)
_TIERS = _mapping({tier: (TIER_SCHEMA, True) for tier in TIERS})

# NCCL itself (the nccl role): the package version installed and held, the oldest NCCL adopt mode keeps (default: the
# pin's own version), and the basis of both. A fabric sets it; a profile overrides it key by key.
NCCL_SCHEMA = _mapping(
    {
        "version": (
            _must_match(
                nccl.PACKAGE_VERSION, "must be a package version of NVIDIA's NCCL such as '2.27.5-1+cuda12.9' (quoted)"
            ),
            True,
        ),
        "minimum": (_must_match(nccl.UPSTREAM_VERSION, "must be an NCCL version such as '2.25.2' (quoted)"), False),
        "source": (_TEXT, True),
    }
)

# Bare-metal host tuning (the host_tuning role): each key present is a setting the role applies, absent is one it
# leaves alone; the inventory's host_tuning_<key> overrides it. The basis of the values is the source.
HOST_TUNING_SCHEMA = _mapping(
    {
        "acs": (_choice(host_tuning.CHOICES["acs"]), False),
        "iommu": (_choice(host_tuning.CHOICES["iommu"]), False),
        "nic_pci_write_ordering": (_choice(host_tuning.CHOICES["nic_pci_write_ordering"]), False),
        "cpu_governor": (
            _must_match(host_tuning.GOVERNOR, "must be a cpufreq governor name such as 'performance'"),
            False,
        ),
        "irqbalance": (_choice(host_tuning.CHOICES["irqbalance"]), False),
        "source": (_TEXT, True),
    }
)

PROFILE_SCHEMA = _mapping(
    {
        "cloud": (_choice(CLOUDS), True),
        "instance_type": (_INSTANCE_TYPE, True),
        "description": (_TEXT, True),
        "gpu": (
            _mapping(
                {
                    "model": (_TEXT, True),
                    "count": (_int_min(1), True),
                    "nvswitch": (_BOOL, True),
                    "pci_id": (_PCI_ID, False),
                }
            ),
            True,
        ),
        "nics": (
            _mapping(
                {
                    "gpu": (
                        _mapping(
                            {
                                "count": (_int_min(0), True),
                                "speed_gbit_s": (_POSITIVE_NUMBER, True),
                                "kind": (_choice(NIC_KINDS), True),
                                "mtu": (_int_min(576), False),
                                "pci_ids": (_list_of(_PCI_ID), False),
                                "rdma_devices": (_list_of(_RDMA_DEVICE), False),
                            }
                        ),
                        True,
                    ),
                    "management": (
                        _mapping(
                            {
                                "kind": (_TEXT, True),
                                "count": (_int_min(1), False),  # default 1 (A3 Ultra, A4, A4X: two gVNICs)
                                "speed_gbit_s": (_POSITIVE_NUMBER, False),
                            }
                        ),
                        True,
                    ),
                }
            ),
            True,
        ),
        # No interface names: each image names NICs its own way. The NIC groups are found by identity and env values
        # name them through placeholders such as {nics.gpu} (module_utils/fabric_nics.py, docs/catalog.md).
        "architecture": (_choice(ARCHITECTURES), False),
        "fabric": (_choice(FABRICS), True),
        # Rack-scale NVLink (GB200/GB300 NVL72): the GPUs of one NVLink domain span several hosts, which IMEX joins.
        # `fabric` is then the scale-out network between domains; bandwidth.thresholds judge runs across domains and
        # nvlink.thresholds runs within one domain.
        "nvlink": (
            _mapping({"domain_gpus": (_int_min(2), True), "source": (_TEXT, True), "thresholds": (_THRESHOLDS, False)}),
            False,
        ),
        # SR-IOV virtual functions carved from every GPU-network NIC (ConnectX physical functions only):
        # the sriov role creates them, `gpufabric k8s manifests` hands them to pods.
        "sriov": (_mapping({"vfs_per_nic": (_int_min(1), True)}), False),
        "host_tuning": (HOST_TUNING_SCHEMA, False),
        # The NICs that serve storage (GPUDirect Storage reaches NFS over RDMA, Lustre and the like through them), with
        # the source that says the instance type or board has them; absent: the profile declares none. The gds role
        # needs it for network mounts (docs/catalog.md, "Storage NICs").
        "storage": (
            _mapping(
                {
                    "nics": (
                        _mapping(
                            {
                                "count": (_int_min(1), True),
                                "kind": (_choice(NIC_KINDS), True),
                                "speed_gbit_s": (_POSITIVE_NUMBER, False),
                                # gpu: the storage traffic shares the GPU network's NICs (no NICs of its own)
                                "shared_with": (_choice(("gpu",)), False),
                            }
                        ),
                        True,
                    ),
                    "source": (_TEXT, True),
                }
            ),
            False,
        ),
        "tiers": (_TIERS, True),
        "bandwidth": (
            _mapping(
                {
                    "line_rate_gbit_s": (_POSITIVE_NUMBER, True),
                    "source": (_TEXT, True),
                    "thresholds": (_THRESHOLDS, True),
                }
            ),
            True,
        ),
        "nccl": (NCCL_SCHEMA, False),
        "sources": (_list_of(_TEXT), False),
    }
)


def _is_integer(_checker: Any, value: Any) -> bool:
    """An int, never a bool (YAML's true) or a float (JSON Schema's integer would take 8.0)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_checker: Any, value: Any) -> bool:
    """A finite int or float, never a bool: YAML reads .nan and .inf as floats, and NaN compares false with
    every bound (exclusiveMinimum 0 would pass it), so a NaN or infinite threshold would judge nothing."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 with the integer and number above."""
    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", _is_integer).redefine("number", _is_number)
    return jsonschema.validators.extend(base, type_checker=checker)


def _where(path: str, keys: list[Any]) -> str:
    return path + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in keys)


def _reason(error: Any) -> tuple[list[Any], str]:
    """(the key path under the checked node, the reason) of a jsonschema error, in the catalog's words."""
    schema, value, keys = error.schema, error.instance, list(error.absolute_path)
    if error.validator == "additionalProperties" and schema["additionalProperties"] is False:
        unknown = next(key for key in value if key not in schema["properties"])
        return [*keys, unknown], f"unknown key; accepted: {', '.join(schema['properties'])}"
    if error.validator == "required":
        missing = next(key for key in schema["required"] if key not in value)
        return [*keys, missing], "missing required key"
    if error.validator in schema.get("x-messages", {}):
        reason = schema["x-messages"][error.validator]
    elif "x-must" in schema:
        reason = schema["x-must"]
    elif "enum" in schema:
        reason = f"{{value}} is not accepted; accepted: {', '.join(str(choice) for choice in schema['enum'])}"
    elif "x-accepted" in schema:
        reason = f"{{value}} is not accepted; accepted: {schema['x-accepted']}"
    elif schema.get("type") == "object":
        reason = "must be a mapping"
    elif schema.get("type") == "array":
        reason = "must be a list"
    else:
        reason = error.message  # jsonschema's own words: every node above says what it accepts
    shows_value = "{value}" in reason or "{type}" in reason
    reason = reason.replace("{value}", _repr(value)).replace("{type}", type(value).__name__)
    if keys and isinstance(keys[-1], int) and schema.get("type") != "object":
        return keys[:-1], f"item {keys[-1]} ({_repr(value)}) {reason}"
    if not shows_value:
        reason += f"; got {_repr(value)}"
    if keys and schema.get("x-in-mapping"):
        reason = f"{keys.pop()} {reason}"
    return keys, reason


def _check_schema(data: Any, schema: dict[str, Any], path: str, source: str) -> None:
    """Raise CatalogError for the first way ``data`` breaks ``schema``: file, key path, value, what is accepted."""
    if jsonschema is None:
        raise CatalogError(
            source,
            path,
            f"cannot check the catalog: the Python package jsonschema is missing ({JSONSCHEMA_IMPORT_ERROR}); "
            "accepted: the collection's requirements.txt installed beside Ansible",
        )
    error = next(_validator_class()(schema).iter_errors(data), None)
    if error is not None:
        keys, reason = _reason(error)
        raise CatalogError(source, _where(path, keys), reason)


def _unprintable(text: str) -> str | None:
    """The first character that has no place in one line of a file on a host, or None.

    Control, format (zero-width, bidi override) and line/paragraph-separator characters are refused;
    spaces and printable non-ASCII (a description's 'x' or an em dash) are fine.
    """
    if text.isprintable():
        return None
    for char in text:
        if not char.isprintable() and unicodedata.category(char) != "Zs":
            return char
    return None


def _check_line(text: str, path: str, what: str, source: str) -> None:
    char = _unprintable(text)
    if char is not None:
        raise CatalogError(
            source,
            path,
            f"{what} {_repr(text)} holds {unicodedata.name(char, 'a control character')} (U+{ord(char):04X}); "
            "accepted: one line of printable text",
        )


def _check_text(data: Any, path: str, source: str) -> None:
    """Every string in a profile, key or value, is one line of printable text."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str):
                _check_line(key, path, "key", source)
            _check_text(value, f"{path}.{key}", source)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            _check_text(item, f"{path}[{index}]", source)
    elif isinstance(data, str):
        _check_line(data, path, "value", source)


def _check_threshold(threshold: dict[str, Any], where: str, source: str) -> None:
    if threshold.get("max_nodes", threshold["min_nodes"]) < threshold["min_nodes"]:
        raise CatalogError(source, f"{where}.max_nodes", "must be >= min_nodes")


def _check_nvlink(profile: dict[str, Any], path: str, source: str) -> None:
    """An NVLink domain is whole hosts, more than one: its GPU count is a multiple of the host's, above it."""
    nvlink = profile.get("nvlink")
    if nvlink is None:
        return
    per_host = profile["gpu"]["count"]
    if nvlink["domain_gpus"] % per_host or nvlink["domain_gpus"] <= per_host:
        raise CatalogError(
            source,
            f"{path}.nvlink.domain_gpus",
            f"{nvlink['domain_gpus']} is not a multiple of gpu.count {per_host} above it; accepted: the GPUs of "
            "two or more whole hosts",
        )
    for index, threshold in enumerate(nvlink.get("thresholds") or []):
        _check_threshold(threshold, f"{path}.nvlink.thresholds[{index}]", source)


def _check_nccl(profile: dict[str, Any], path: str, source: str) -> None:
    """The pin is at the minimum or newer, and the minimum at what the profile's GPUs and NVLink need."""
    pin = profile.get("nccl")
    if pin is None:
        return
    minimum = nccl.minimum_of(pin)
    if nccl.older(pin["version"], minimum):
        raise CatalogError(source, f"{path}.nccl.version", f"{pin['version']} is older than nccl.minimum {minimum}")
    for floor, why in nccl.floors(profile["gpu"]["model"], "nvlink" in profile):
        if nccl.older(minimum, floor):
            raise CatalogError(
                source,
                f"{path}.nccl.minimum",
                f"{minimum} is below {floor}, the oldest NCCL for {why}; accepted: {floor} or newer",
            )
    cuda = nccl.cuda_release(pin["version"])
    needed = nccl.gpu_cuda(profile["gpu"]["model"])
    if needed and cuda and cuda < needed[0]:
        raise CatalogError(
            source,
            f"{path}.nccl.version",
            f"{pin['version']} is built with CUDA {cuda[0]}.{cuda[1]}; {needed[1]}; accepted: a +cuda{needed[0][0]}."
            f"{needed[0][1]} build or newer",
        )


def hosts_per_domain(profile: dict[str, Any]) -> int | None:
    """How many hosts one NVLink domain of the profile holds (None without multi-node NVLink)."""
    nvlink = profile.get("nvlink")
    return nvlink["domain_gpus"] // profile["gpu"]["count"] if nvlink else None


CONNECTX_NIC_KINDS = ("connectx_ib", "connectx_roce")


# Profile sections that configure the role of the same name: declared exactly where the best tier runs that role.
ROLE_SECTIONS = ("sriov", "host_tuning")


def _check_role_section(profile: dict[str, Any], section: str, path: str, source: str) -> None:
    """A section that configures one role is declared exactly where the best tier runs that role (a tier naming the
    role without it would run it with nothing to do; the section without the role would never be applied)."""
    declared = section in profile
    for tier_name, tier in profile["tiers"].items():
        if section in tier["roles"] and not declared:
            raise CatalogError(
                source, f"{path}.tiers.{tier_name}.roles", f"names {section}, but the profile has no {section}: section"
            )
    if declared and section not in profile["tiers"]["best"]["roles"]:
        raise CatalogError(
            source,
            f"{path}.{section}",
            f"is declared, but tiers.best.roles does not name {section}; accepted: {section} in tiers.best.roles, or "
            f"no {section} section (an override drops it with '{section}: null')",
        )


def _check_storage(profile: dict[str, Any], path: str, source: str) -> None:
    """A tier that runs gds names a profile with storage NICs: GPUDirect Storage reaches network storage through
    them, and the catalog says a profile has them only where a source does (the section may stand without the role:
    the mounts are a site's, so a site adds gds to its tier in an override)."""
    if "storage" in profile:
        return
    for tier_name, tier in profile["tiers"].items():
        if "gds" in tier["roles"]:
            raise CatalogError(
                source,
                f"{path}.tiers.{tier_name}.roles",
                "names gds, but the profile has no storage: section; accepted: a storage section naming the storage "
                "NICs and their source, or no gds",
            )


def _check_sriov(profile: dict[str, Any], path: str, source: str) -> None:
    """VFs are carved from NICs that can carve them."""
    if "sriov" not in profile:
        return
    kind = profile["nics"]["gpu"]["kind"]
    if kind not in CONNECTX_NIC_KINDS:
        raise CatalogError(
            source,
            f"{path}.sriov",
            f"nics.gpu.kind {kind!r} cannot carve virtual functions here; accepted: {', '.join(CONNECTX_NIC_KINDS)}",
        )


def _check_host_tuning(profile: dict[str, Any], path: str, source: str) -> None:
    """mstconfig sets ConnectX firmware only."""
    kind = profile["nics"]["gpu"]["kind"]
    if "nic_pci_write_ordering" in profile.get("host_tuning", {}) and kind not in CONNECTX_NIC_KINDS:
        raise CatalogError(
            source,
            f"{path}.host_tuning.nic_pci_write_ordering",
            f"is ConnectX firmware (mstconfig), but nics.gpu.kind is {kind!r}; accepted with: "
            f"{', '.join(CONNECTX_NIC_KINDS)}",
        )


def _check_nic_placeholders(profile: dict[str, Any], path: str, source: str) -> None:
    """Every {nics...} placeholder in a tier's env names a NIC group the host can name (fabric_nics). Pods have
    their own names (the network attachment's), so k8s_env gives names or null, never a placeholder."""
    for tier_name, tier in profile["tiers"].items():
        for key, value in tier["env"].items():
            errors = fabric_nics.placeholder_errors(str(value), profile["nics"])
            if errors:
                raise CatalogError(source, f"{path}.tiers.{tier_name}.env.{key}", "; ".join(errors))
        for key, value in (tier.get("k8s_env") or {}).items():
            if value is not None and fabric_nics.MAYBE_PLACEHOLDER.search(str(value)):
                raise CatalogError(
                    source,
                    f"{path}.tiers.{tier_name}.k8s_env.{key}",
                    f"value {value!r} names host NICs; accepted: the pod's interface names, or null to unset",
                )


def validate_profile(name: str, profile: Any, source: str) -> None:
    """Raise CatalogError unless ``profile`` is complete and consistent.

    Then normalise it in place: environment values become strings, as a
    process environment holds them (YAML may have read ``4`` as a number).
    """
    path = f"profiles.{name}"
    _check_text(profile, path, source)
    _check_schema(profile, PROFILE_SCHEMA, path, source)
    _check_tier_env_lengths(profile, path, source)
    cloud, _sep, instance_type = name.partition("/")
    if profile["cloud"] != cloud or profile["instance_type"] != instance_type:
        raise CatalogError(
            source,
            path,
            f"profile name must be '<cloud>/<instance_type>', i.e. '{profile['cloud']}/{profile['instance_type']}'",
        )
    for index, threshold in enumerate(profile["bandwidth"]["thresholds"]):
        _check_threshold(threshold, f"{path}.bandwidth.thresholds[{index}]", source)
    _check_nvlink(profile, path, source)
    _check_nccl(profile, path, source)
    for section in ROLE_SECTIONS:
        _check_role_section(profile, section, path, source)
    _check_sriov(profile, path, source)
    _check_host_tuning(profile, path, source)
    _check_storage(profile, path, source)
    for tier in profile["tiers"].values():
        tier["env"] = {key: str(value) for key, value in tier["env"].items()}
        if "k8s_env" in tier:
            tier["k8s_env"] = {key: None if value is None else str(value) for key, value in tier["k8s_env"].items()}
    _check_nic_placeholders(profile, path, source)


# ---------------------------------------------------------------------------
# Images: a cloud's own GPU image (or a site's golden image) and what its stack means for the roles
# ---------------------------------------------------------------------------

IMAGE_SCHEMA = _mapping(
    {
        "description": (_TEXT, True),
        # How the cloud names it (image family, marketplace URN, AMI name pattern): for the reader, not matched.
        "reference": (_TEXT, True),
        "os": (_choice(OS_NAMES), True),
        "adopt": (_list_of(_choice(ADOPTING_ROLES)), True),
        "sources": (_list_of(_TEXT), False),
    }
)


def validate_image(name: str, image: Any, source: str) -> None:
    """Raise CatalogError unless ``image`` names its OS and the roles that adopt its stack."""
    path = f"images.{name}"
    _check_text(image, path, source)
    _check_schema(image, IMAGE_SCHEMA, path, source)
    if len(set(image["adopt"])) != len(image["adopt"]):
        raise CatalogError(source, f"{path}.adopt", f"names a role twice: {image['adopt']}")


# ---------------------------------------------------------------------------
# Fabrics: what follows from the fabric, and what its NCCL plugin accepts
# ---------------------------------------------------------------------------


def _env_checks() -> dict[str, Any]:
    """The roles' own env rules by name, so that the catalog refuses at load time what the host would refuse.

    Imported when a catalog names them: one function per rule, called by the role on the host and here.
    Each takes (env, profile) and returns error sentences that name the value and what is accepted.
    """
    from ansible_collections.gpufabric.cluster.plugins.module_utils import (
        gcp_gpudirect_rdma,
        gcp_tcpxo,
        infiniband,
        roce,
    )

    def tcpxo(env: dict[str, str], profile: str) -> list[str]:
        errors, _warnings = gcp_tcpxo.guest_config_findings(env, profile)
        gcp_tcpxo.plugin_lib_dir(env, profile, errors)
        return errors

    return {
        "gcp_tcpxo": tcpxo,
        "gcp_gpudirect_rdma": gcp_gpudirect_rdma.env_errors,
        "infiniband": infiniband.env_errors,
        "roce": roce.env_errors,
    }


ENV_CHECKS = ("gcp_tcpxo", "gcp_gpudirect_rdma", "infiniband", "roce")


ENV_RULES_SCHEMA = _mapping(
    {
        # variables tier best must set
        "require": (_list_of(_matches(ENV_NAME, f"a variable name ({ENV_NAME.pattern})")), False),
        # where set, one of these values
        "values": (
            {
                "type": "object",
                "x-must": "must be a mapping of VARIABLE: [accepted values]",
                "propertyNames": _ENV_NAME,
                "additionalProperties": _list_of(
                    _TEXT, minItems=1, **{"x-messages": {"minItems": "must name at least one value"}}
                ),
            },
            False,
        ),
        # variables tier best must not set, with the reason
        "forbid": (
            {
                "type": "object",
                "x-must": "must be a mapping of VARIABLE: why the fabric forbids it",
                "propertyNames": _ENV_NAME,
                "additionalProperties": _in_mapping(_text_schema("must say why the fabric forbids it")),
            },
            False,
        ),
        # the roles' rule functions (_env_checks)
        "checks": (_list_of(_choice(ENV_CHECKS)), False),
    }
)

FABRIC_SCHEMA = _mapping(
    {
        "description": (_TEXT, True),
        # The roles of tier best are required in every profile of the fabric, in this order.
        "tiers": (_TIERS, True),
        "env_rules": (ENV_RULES_SCHEMA, False),
        "nccl": (NCCL_SCHEMA, False),
        # The vendor's guest-config constraints, each with its source: why env_rules say what they say.
        "constraints": (_list_of(_TEXT), False),
        "sources": (_list_of(_TEXT), False),
    }
)


def validate_fabric(name: str, fabric: Any, source: str) -> None:
    """Raise CatalogError unless the fabric entry is complete; normalise its env values to strings."""
    path = f"fabrics.{name}"
    _check_text(fabric, path, source)
    _check_schema(fabric, FABRIC_SCHEMA, path, source)
    _check_tier_env_lengths(fabric, path, source)
    for tier in fabric["tiers"].values():
        tier["env"] = {key: str(value) for key, value in tier["env"].items()}


def _role_owners(fabrics: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Roles that turn on one fabric (named in tier best of that fabric only), by role: aws_efa -> efa."""
    named: dict[str, list[str]] = {}
    for fabric_name, fabric in fabrics.items():
        for role in fabric["tiers"]["best"]["roles"]:
            named.setdefault(role, []).append(fabric_name)
    return {role: owners[0] for role, owners in named.items() if len(owners) == 1}


def _roles_problem(roles: list[str], fabric: str, listed: list[str] | None, owners: dict[str, str]) -> str | None:
    """Why a tier's roles do not fit the fabric, or None.

    ``listed`` is the fabric's tier best roles (None: the fabric has no entry). A tier may leave roles
    out (a lab runs what a container can: gpufabric.lab_files.catalog_override) or add some (sriov),
    but never another fabric's role, and the roles it shares with the fabric keep the fabric's order.
    """
    for role in roles:
        owner = owners.get(role)
        if owner is not None and owner != fabric:
            return f"names {role}, the role of fabric {owner}; a profile of fabric {fabric} cannot run it"
    if listed is None:
        return None
    shared = [role for role in roles if role in listed]
    if shared != [role for role in listed if role in shared]:
        return f"names {', '.join(shared)} in another order; fabric {fabric} runs {', '.join(listed)} in this order"
    return None


def _env_problems(env: dict[str, str], rules: dict[str, Any], fabric: str, profile: str) -> list[tuple[str, str]]:
    """(env variable or '', reason) for each way tier best's env breaks the fabric's rules."""
    problems: list[tuple[str, str]] = []
    for name in rules.get("require", []):
        if name not in env:
            problems.append(("", f"lacks {name}, which fabric {fabric} requires"))
    for name, accepted in rules.get("values", {}).items():
        if name in env and env[name] not in accepted:
            problems.append(
                (name, f"{name} {env[name]!r} is not accepted by fabric {fabric}; accepted: {', '.join(accepted)}")
            )
    for name, why in rules.get("forbid", {}).items():
        if name in env:
            problems.append((name, f"{name} is set ({env[name]!r}); fabric {fabric} forbids it: {why}"))
    checks = _env_checks() if rules.get("checks") else {}
    for check in rules.get("checks", []):
        problems.extend(("", reason) for reason in checks[check](env, profile))
    return problems


# ---------------------------------------------------------------------------
# Loading, inheriting and merging, with where each value came from
# ---------------------------------------------------------------------------

# Where a value came from: (kind, file, fabric); kind is "fabric", "profile" or "override".
Origin = tuple[str, str, str]


def _shown(value: Any) -> str:
    """A key as an error shows it: as written when it is a short line of printable text, else its repr."""
    plain = isinstance(value, str) and 0 < len(value) <= 80 and _unprintable(value) is None
    return value if plain else _repr(value)


SECTIONS = ("profiles", "fabrics", "images")


def _read_yaml(path: Path) -> dict[str, dict[str, Any]]:
    """The file's sections, each a mapping by name (empty when the file has none)."""
    source = str(path)
    try:
        data = load_file(path, text_maps=("env", "k8s_env"))  # environment values are text as written
    except YAMLFileError as exc:
        raise CatalogError(exc.source, exc.where, exc.reason) from None
    if not isinstance(data, dict) or not any(isinstance(data.get(section), dict) for section in SECTIONS):
        raise CatalogError(
            source,
            "profiles",
            "the file must be a mapping with a 'profiles:' mapping, a 'fabrics:' mapping or an 'images:' mapping",
        )
    unknown = sorted(_shown(key) for key in data if key not in SECTIONS)
    if unknown:
        raise CatalogError(source, unknown[0], f"unknown top-level key; accepted: {', '.join(SECTIONS)}")
    for section in SECTIONS:
        if not isinstance(data.get(section, {}), dict):
            raise CatalogError(source, section, f"the file's '{section}:' must be a mapping")
    for name in data.get("profiles", {}):
        if not isinstance(name, str) or not PROFILE_NAME.match(name):
            raise CatalogError(
                source,
                f"profiles.{_shown(name)}",
                "is not a profile name; accepted: '<cloud>/<instance-type>', a lowercase cloud, '/', then 1-64 "
                "letters, digits, '.', '_' or '-'",
            )
    for name in data.get("images", {}):
        if not isinstance(name, str) or not PROFILE_NAME.match(name):
            raise CatalogError(
                source,
                f"images.{_shown(name)}",
                "is not an image name; accepted: '<cloud>/<image>', a lowercase cloud, '/', then 1-64 letters, "
                "digits, '.', '_' or '-'",
            )
    for name in data.get("fabrics", {}):
        if name not in FABRICS:
            raise CatalogError(source, f"fabrics.{_shown(name)}", f"is not a fabric; accepted: {', '.join(FABRICS)}")
    for section in SECTIONS:
        for name, entry in data.get(section, {}).items():
            if not isinstance(entry, dict):
                raise CatalogError(source, f"{section}.{name}", "must be a mapping")
    return {section: data.get(section, {}) for section in SECTIONS}


def _origin_tree(data: Any, origin: Origin) -> Any:
    """``data``'s shape with ``origin`` at every leaf (lists are leaves: they replace, never merge)."""
    if isinstance(data, dict):
        return {key: _origin_tree(value, origin) for key, value in data.items()}
    return origin


def _merge(base: dict[str, Any], base_from: Any, over: dict[str, Any], over_from: Any, *, null_removes: bool) -> Any:
    """Merge ``over`` over ``base``, and their origin trees alike: mappings merge, anything else replaces.

    With ``null_removes`` a null drops the key (a site drops a variable a built-in profile sets);
    without, it stays (a profile's k8s_env null means "unset in pods" whatever its fabric says).
    """
    merged = copy.deepcopy(base)
    merged_from = dict(base_from) if isinstance(base_from, dict) else {}
    for key, value in over.items():
        if value is None and null_removes:
            merged.pop(key, None)
            merged_from.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key], merged_from[key] = _merge(
                merged[key], merged_from.get(key), value, over_from[key], null_removes=null_removes
            )
        else:
            merged[key] = copy.deepcopy(value)
            merged_from[key] = over_from[key]
    return merged, merged_from


# The sections a profile inherits from its fabric, merged key by key under its own.
INHERITED = ("tiers", "nccl")


def _inherit(
    profile: dict[str, Any], profile_from: Any, fabrics: dict[str, Any], fabrics_from: dict[str, Any]
) -> tuple[dict[str, Any], Any]:
    """The profile over its fabric's tiers and NCCL pin: env maps and nccl merge key by key, roles (a list) replace.

    A null in a profile's env removes the fabric's variable. Keys come in schema order, as in a
    profile that spells everything out.
    """
    fabric = profile.get("fabric")
    tiers = profile.get("tiers", {})
    if isinstance(fabric, str) and fabric in fabrics and isinstance(tiers, dict):
        profile = dict(profile)
        profile_from = dict(profile_from)
        for section in INHERITED:
            own = profile.get(section, {})
            if section in fabrics[fabric] and isinstance(own, dict):
                profile[section], profile_from[section] = _merge(
                    fabrics[fabric][section],
                    fabrics_from[fabric][section],
                    own,
                    profile_from.get(section, {}),
                    null_removes=False,
                )
        for tier_name, tier in profile["tiers"].items():
            env = tier.get("env") if isinstance(tier, dict) else None
            if isinstance(env, dict):
                for key in [key for key, value in env.items() if value is None]:
                    del env[key]
                    del profile_from["tiers"][tier_name]["env"][key]
    order = {key: index for index, key in enumerate(PROFILE_SCHEMA)}
    keys = sorted(profile, key=lambda key: order.get(key, len(order)))
    return {key: profile[key] for key in keys}, {key: profile_from[key] for key in keys if key in profile_from}


def _flatten(tree: Any, prefix: str = "") -> dict[str, Origin]:
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat: dict[str, Origin] = {}
    for key, value in tree.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def load_named_catalog(overrides: list[tuple[str, Path]]) -> Catalog:
    """load_catalog over override files each with where it was named (--catalog, GPUFABRIC_CATALOG, an option): a
    file that cannot be read is one error naming the value as given, where it came from and what is accepted."""
    try:
        return load_catalog([path for _where, path in overrides])
    except CatalogError as exc:
        where = next((where for where, path in overrides if str(path) == exc.source), None)
        if exc.key or where is None:
            raise
        reason = exc.reason if "accepted:" in exc.reason else f"{exc.reason}; accepted: a readable catalog YAML file"
        raise CatalogError(f"{exc.source!r} ({where})", "", reason) from None


def env_overrides(environ: dict[str, str] | None = None) -> list[tuple[str, Path]]:
    """override_files_from_env, each named GPUFABRIC_CATALOG (load_named_catalog)."""
    return [(CATALOG_ENV_VAR, path) for path in override_files_from_env(environ)]


def override_files_from_env(environ: dict[str, str] | None = None) -> list[Path]:
    """Files named in GPUFABRIC_CATALOG (separated like PATH)."""
    value = (environ if environ is not None else os.environ).get(CATALOG_ENV_VAR, "")
    return [Path(part) for part in value.split(os.pathsep) if part]


class Catalog:
    """Validated profiles by name, where each was last defined, and where each of their values came from."""

    def __init__(
        self,
        profiles: dict[str, dict[str, Any]],
        origins: dict[str, str],
        fabrics: dict[str, dict[str, Any]] | None = None,
        provenance: dict[str, dict[str, Origin]] | None = None,
        images: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.profiles = profiles
        self.origins = origins
        self.fabrics = fabrics or {}
        self.images = images or {}
        # Per profile: dotted key path of each value (a list is one value) -> (kind, file, fabric).
        self.provenance = provenance or {}
        self._by_instance = {(p["cloud"], p["instance_type"]): name for name, p in profiles.items()}

    def names(self) -> list[str]:
        return sorted(self.profiles)

    def get(self, name: str) -> dict[str, Any] | None:
        return self.profiles.get(name)

    def find(self, cloud: str, instance_type: str) -> str | None:
        """Profile name for a cloud's instance type, or None."""
        return self._by_instance.get((cloud, instance_type))


class _Loader:
    """One load: the files in order, fabrics and profiles with origin trees, then validation."""

    def __init__(self) -> None:
        self.files: list[str] = []  # in the order they apply: a later file wins
        self.fabrics: dict[str, dict[str, Any]] = {}
        self.fabrics_from: dict[str, Any] = {}
        self.fabric_origins: dict[str, str] = {}
        self.raw: list[tuple[str, dict[str, Any], str]] = []  # (name, profile, file) as the files give them
        # Images by name: a later file's entry replaces an earlier one whole (an image is one decision, not a tree).
        self.images: dict[str, dict[str, Any]] = {}
        self.image_origins: dict[str, str] = {}

    def read(self, path: Path, builtin: bool) -> None:
        source = str(path)
        sections = _read_yaml(path)
        self.files.append(source)
        for name, fabric in sections["fabrics"].items():
            if builtin and name in self.fabrics:
                raise CatalogError(source, f"fabrics.{name}", f"already defined in {self.fabric_origins[name]}")
            origin: Origin = ("fabric" if builtin else "override", source, name)
            self.fabrics[name], self.fabrics_from[name] = _merge(
                self.fabrics.get(name, {}),
                self.fabrics_from.get(name),
                fabric,
                _origin_tree(fabric, origin),
                null_removes=True,
            )
            self.fabric_origins[name] = source
        for name, profile in sections["profiles"].items():
            self.raw.append((name, profile, source))
        for name, image in sections["images"].items():
            if builtin and name in self.images:
                raise CatalogError(source, f"images.{name}", f"already defined in {self.image_origins[name]}")
            validate_image(name, image, source)
            self.images[name], self.image_origins[name] = copy.deepcopy(image), source

    def _source(self, flat: dict[str, Origin], key: str, fallback: str) -> str:
        """The file that gave the value at ``key``; for a mapping (an env as a whole, where a variable may be
        missing because a file removed it), the newest file among its values and ``fallback``, the last
        file that changed the profile."""
        if key in flat:
            return flat[key][1]
        prefix = key + "."
        files = [origin[1] for path, origin in flat.items() if path.startswith(prefix)] + [fallback]
        return max(files, key=self.files.index)

    def build(self, builtin_files: list[str]) -> Catalog:
        for name, fabric in self.fabrics.items():
            validate_fabric(name, fabric, self.fabric_origins[name])
        owners = _role_owners(self.fabrics)
        profiles: dict[str, dict[str, Any]] = {}
        trees: dict[str, Any] = {}
        origins: dict[str, str] = {}
        for name, profile, source in self.raw:
            if source in builtin_files:
                if name in profiles:
                    raise CatalogError(source, f"profiles.{name}", f"already defined in {origins[name]}")
                profiles[name], trees[name] = _inherit(
                    profile, _origin_tree(profile, ("profile", source, "")), self.fabrics, self.fabrics_from
                )
            elif name in profiles:
                # A site file changes the resolved profile, as `gpufabric catalog show` prints it.
                profiles[name], trees[name] = _merge(
                    profiles[name],
                    trees[name],
                    profile,
                    _origin_tree(profile, ("override", source, "")),
                    null_removes=True,
                )
            else:
                profiles[name], trees[name] = _inherit(
                    profile, _origin_tree(profile, ("override", source, "")), self.fabrics, self.fabrics_from
                )
            origins[name] = source
        provenance = {name: _flatten(tree) for name, tree in trees.items()}
        for name, profile in profiles.items():
            flat = provenance[name]
            try:
                validate_profile(name, profile, origins[name])
            except CatalogError as exc:
                # Name the file that gave the bad value where it is one value (a fabric, an override).
                where = exc.key.removeprefix(f"profiles.{name}.")
                if where in flat and flat[where][1] != exc.source:
                    raise CatalogError(flat[where][1], exc.key, exc.reason) from None
                raise
            self._check_fabric(name, profile, flat, owners, origins[name])
        return Catalog(profiles, origins, self.fabrics, provenance, self.images)

    def _check_fabric(
        self, name: str, profile: dict[str, Any], flat: dict[str, Origin], owners: dict[str, str], fallback: str
    ) -> None:
        """The profile's roles fit its fabric, and tier best's env keeps the fabric's rules."""
        fabric_name = profile["fabric"]
        fabric = self.fabrics.get(fabric_name)
        for tier_name, tier in profile["tiers"].items():
            listed = fabric["tiers"]["best"]["roles"] if fabric else None
            problem = _roles_problem(tier["roles"], fabric_name, listed, owners)
            if problem:
                key = f"tiers.{tier_name}.roles"
                accepted = f" (tier {tier_name} roles: {', '.join(tier['roles'])})"
                raise CatalogError(self._source(flat, key, fallback), f"profiles.{name}.{key}", problem + accepted)
        if not fabric:
            return
        for variable, reason in _env_problems(
            profile["tiers"]["best"]["env"], fabric.get("env_rules", {}), fabric_name, name
        ):
            key = "tiers.best.env" + (f".{variable}" if variable else "")
            raise CatalogError(self._source(flat, key, fallback), f"profiles.{name}.{key}", reason)


# Catalogs parsed by this process (the cache's misses): the tests and bench/controller_cpu.py read it.
catalog_parses = 0


def _memoized(load: Callable[..., Catalog]) -> Callable[..., Catalog]:
    """Keep the catalogs loaded in this process, keyed by their files' paths, mtimes and sizes.

    A playbook run asks for the catalog once per host and role, and parsing and validating it is
    the controller's largest cost there. A file that changed (or appeared, or went) reads again; a
    file that cannot be read is never cached, so its error comes from the loader every time. Each
    caller gets its own copy, so one that changes a profile cannot change another's.
    """
    cache: dict[tuple[Any, ...], Catalog] = {}

    @functools.wraps(load)
    def cached(override_files: list[Path] | None = None, builtin_dir: Path = BUILTIN_CATALOG_DIR) -> Catalog:
        global catalog_parses
        try:
            files = [*sorted(Path(builtin_dir).glob("*.yml")), *(Path(f) for f in override_files or [])]
            stats = [(str(f), f.stat()) for f in files]
            key = (str(builtin_dir), *((name, stat.st_mtime_ns, stat.st_size) for name, stat in stats))
        except OSError:
            key = None
        if key is None or key not in cache:
            catalog_parses += 1
            catalog = load(override_files, builtin_dir)
            if key is None:
                return catalog
            cache[key] = catalog
        return copy.deepcopy(cache[key])

    return cached


@_memoized
def load_catalog(
    override_files: list[Path] | None = None,
    builtin_dir: Path = BUILTIN_CATALOG_DIR,
) -> Catalog:
    """Load the built-in catalog, merge overrides in order, inherit fabrics, validate all."""
    builtin_files = sorted(builtin_dir.glob("*.yml"))
    if not builtin_files:
        raise CatalogError(str(builtin_dir), "", "no catalog files (*.yml) found")
    loader = _Loader()
    for path in builtin_files:
        loader.read(path, builtin=True)
    for path in override_files or []:
        loader.read(Path(path), builtin=False)
    return loader.build([str(path) for path in builtin_files])
