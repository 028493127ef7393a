# SPDX-License-Identifier: Apache-2.0
"""Load, merge and validate the fabric catalog.

The catalog is the single source of truth shared by the Python driver and the
Ansible side (lookup plugins, roles). This file depends on PyYAML only, so both
can import it: the driver through the collection on disk, Ansible through
``ansible_collections.gpufabric.cluster.plugins.module_utils.fabric_catalog``.
PyYAML is imported only where a catalog file is read: it comes with ansible-core
on the controller, where that happens, and module_utils must import without it.

Validation is hand-written rather than JSON Schema so that every error names
the file, the key path and what is accepted, in one sentence an operator reads.

Catalog values end up in files on hosts: /etc/nccl.conf, a profile.d script,
systemd units, udev rules, shell scripts. So every string in a profile is one
line of printable text, and the values that name things on a host (profile,
instance type, interfaces, RDMA devices, environment variables) follow a strict
grammar, checked here at load time, before any role templates them.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.module_utils.bounded_yaml import YAMLFileError, load_file

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
    "nccl_env",
    "nccl_tests",
)

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
PCI_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{4}$")
# Names that reach hosts unquoted (unit files, udev rules, shell word lists): letters, digits, '.', '_', '-'.
INSTANCE_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PROFILE_NAME = re.compile(r"^[a-z]+/[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NETDEV = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,14}$")  # a Linux interface name is at most 15 bytes
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
# Schema: a field is (type checker, required). Nested dicts are sub-schemas.
# ---------------------------------------------------------------------------


def _repr(value: Any) -> str:
    """A value as an error shows it: its repr, cut short (a mapping where a name belongs can be long)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _str(value: Any) -> str | None:
    return None if isinstance(value, str) and value else "must be a non-empty string"


def _int_min(low: int):
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            return f"must be an integer >= {low}"
        return None

    return check


def _positive_number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return "must be a positive number"
    return None


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _choice(choices: tuple[str, ...]):
    def check(value: Any) -> str | None:
        if value not in choices:
            return f"{_repr(value)} is not accepted; accepted: {', '.join(choices)}"
        return None

    return check


def _list_of(item_check):
    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return "must be a list"
        for index, item in enumerate(value):
            problem = item_check(item)
            if problem:
                return f"item {index} ({_repr(item)}) {problem}"
        return None

    return check


def _matches(pattern: re.Pattern[str], accepted: str):
    def check(value: Any) -> str | None:
        if isinstance(value, str) and pattern.match(value):
            return None
        return f"{_repr(value)} is not accepted; accepted: {accepted}"

    return check


_instance_type = _matches(INSTANCE_TYPE, "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
_netdev = _matches(NETDEV, "an interface name: 1-15 letters, digits, '.', '_' or '-'")
_rdma_device = _matches(RDMA_DEVICE, "an RDMA device name: 1-64 letters, digits, '.', '_' or '-'")


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


def _pci_id(value: Any) -> str | None:
    if isinstance(value, str) and PCI_ID.match(value):
        return None
    return "must be a PCI vendor:device id such as '15b3:1021' (lowercase hex, quoted)"


def _roles(value: Any) -> str | None:
    problem = _list_of(_choice(KNOWN_ROLES))(value)
    if problem:
        return problem
    if not value:
        return "must name at least one role"
    if len(set(value)) != len(value):
        return "names a role twice"
    return None


def _env(allow_null: bool):
    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return "must be a mapping of VARIABLE: value"
        for name, setting in value.items():
            if not isinstance(name, str) or not ENV_NAME.match(name):
                return f"variable name {_repr(name)} must match {ENV_NAME.pattern}"
            if setting is None and allow_null:
                continue
            if isinstance(setting, bool) or not isinstance(setting, (str, int, float)):
                return f"{name} must be a string (quote it); got {type(setting).__name__}"
            if len(str(setting).encode("utf-8")) > ENV_VALUE_MAX_BYTES:
                return f"{name} value is longer than {ENV_VALUE_MAX_BYTES} bytes, the most /etc/nccl.conf holds"
        return None

    return check


def _thresholds(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return "must be a non-empty list of thresholds"
    return None


THRESHOLD_SCHEMA: dict[str, Any] = {
    "collective": (_choice(COLLECTIVES), True),
    "min_nodes": (_int_min(1), True),
    "max_nodes": (_int_min(1), False),
    "algo": (_choice(ALGOS), True),
    "min_size_bytes": (_int_min(1), True),
    "min_busbw_gbyte_s": (_positive_number, True),
    "verified": (_bool, True),
    "basis": (_str, True),
}

TIER_SCHEMA: dict[str, Any] = {
    "roles": (_roles, True),
    "env": (_env(allow_null=False), True),
    "k8s_env": (_env(allow_null=True), False),
}

PROFILE_SCHEMA: dict[str, Any] = {
    "cloud": (_choice(CLOUDS), True),
    "instance_type": (_instance_type, True),
    "description": (_str, True),
    "gpu": (
        {
            "model": (_str, True),
            "count": (_int_min(1), True),
            "nvswitch": (_bool, True),
            "pci_id": (_pci_id, False),
        },
        True,
    ),
    "nics": (
        {
            "gpu": (
                {
                    "count": (_int_min(0), True),
                    "speed_gbit_s": (_positive_number, True),
                    "kind": (_choice(NIC_KINDS), True),
                    "mtu": (_int_min(576), False),
                    "pci_ids": (_list_of(_pci_id), False),
                    "interfaces": (_list_of(_netdev), False),
                    "rdma_devices": (_list_of(_rdma_device), False),
                },
                True,
            ),
            "management": (
                {
                    "kind": (_str, True),
                    "interface": (_netdev, False),
                    "speed_gbit_s": (_positive_number, False),
                },
                True,
            ),
        },
        True,
    ),
    "fabric": (_choice(FABRICS), True),
    # SR-IOV virtual functions carved from every GPU-network NIC (ConnectX physical functions only):
    # the sriov role creates them, `gpufabric k8s manifests` hands them to pods.
    "sriov": (
        {
            "vfs_per_nic": (_int_min(1), True),
        },
        False,
    ),
    "tiers": ({tier: (TIER_SCHEMA, True) for tier in TIERS}, True),
    "bandwidth": (
        {
            "line_rate_gbit_s": (_positive_number, True),
            "source": (_str, True),
            "thresholds": (_thresholds, True),
        },
        True,
    ),
    "sources": (_list_of(_str), False),
}


def _check_mapping(data: Any, schema: dict[str, Any], path: str, source: str) -> None:
    if not isinstance(data, dict):
        raise CatalogError(source, path, "must be a mapping")
    for key in data:
        if key not in schema:
            raise CatalogError(source, f"{path}.{key}", f"unknown key; accepted: {', '.join(schema)}")
    for key, (check, required) in schema.items():
        where = f"{path}.{key}"
        if key not in data:
            if required:
                raise CatalogError(source, where, "missing required key")
            continue
        if isinstance(check, dict):
            _check_mapping(data[key], check, where, source)
            continue
        problem = check(data[key])
        if problem:
            raise CatalogError(source, where, problem)


SRIOV_NIC_KINDS = ("connectx_ib", "connectx_roce")


def _check_sriov(profile: dict[str, Any], path: str, source: str) -> None:
    """VFs are declared exactly where a tier runs the sriov role, on NICs that can carve them."""
    declared = "sriov" in profile
    for tier_name, tier in profile["tiers"].items():
        if "sriov" in tier["roles"] and not declared:
            raise CatalogError(
                source, f"{path}.tiers.{tier_name}.roles", "names sriov, but the profile has no sriov: section"
            )
    if not declared:
        return
    if "sriov" not in profile["tiers"]["best"]["roles"]:
        raise CatalogError(source, f"{path}.sriov", "is declared, but tiers.best.roles does not name sriov")
    kind = profile["nics"]["gpu"]["kind"]
    if kind not in SRIOV_NIC_KINDS:
        raise CatalogError(
            source,
            f"{path}.sriov",
            f"nics.gpu.kind {kind!r} cannot carve virtual functions here; accepted: {', '.join(SRIOV_NIC_KINDS)}",
        )


def validate_profile(name: str, profile: Any, source: str) -> None:
    """Raise CatalogError unless ``profile`` is complete and consistent.

    Then normalise it in place: environment values become strings, as a
    process environment holds them (YAML may have read ``4`` as a number).
    """
    path = f"profiles.{name}"
    _check_text(profile, path, source)
    _check_mapping(profile, PROFILE_SCHEMA, path, source)
    cloud, _sep, instance_type = name.partition("/")
    if profile["cloud"] != cloud or profile["instance_type"] != instance_type:
        raise CatalogError(
            source,
            path,
            f"profile name must be '<cloud>/<instance_type>', i.e. '{profile['cloud']}/{profile['instance_type']}'",
        )
    for index, threshold in enumerate(profile["bandwidth"]["thresholds"]):
        where = f"{path}.bandwidth.thresholds[{index}]"
        _check_mapping(threshold, THRESHOLD_SCHEMA, where, source)
        if threshold.get("max_nodes", threshold["min_nodes"]) < threshold["min_nodes"]:
            raise CatalogError(source, f"{where}.max_nodes", "must be >= min_nodes")
    _check_sriov(profile, path, source)
    for tier in profile["tiers"].values():
        tier["env"] = {key: str(value) for key, value in tier["env"].items()}
        if "k8s_env" in tier:
            tier["k8s_env"] = {key: None if value is None else str(value) for key, value in tier["k8s_env"].items()}


# ---------------------------------------------------------------------------
# Loading and merging
# ---------------------------------------------------------------------------


def _shown(value: Any) -> str:
    """A key as an error shows it: as written when it is a short line of printable text, else its repr."""
    plain = isinstance(value, str) and 0 < len(value) <= 80 and _unprintable(value) is None
    return value if plain else _repr(value)


def _read_yaml(path: Path) -> dict[str, Any]:
    source = str(path)
    try:
        data = load_file(path)
    except YAMLFileError as exc:
        raise CatalogError(exc.source, exc.where, exc.reason) from None
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        raise CatalogError(source, "profiles", "the file must be a mapping with a 'profiles:' mapping")
    unknown = sorted(_shown(key) for key in data if key != "profiles")
    if unknown:
        raise CatalogError(source, unknown[0], "unknown top-level key; accepted: profiles")
    for name in data["profiles"]:
        if not isinstance(name, str) or not PROFILE_NAME.match(name):
            raise CatalogError(
                source,
                f"profiles.{_shown(name)}",
                "is not a profile name; accepted: '<cloud>/<instance-type>', a lowercase cloud, '/', then 1-64 "
                "letters, digits, '.', '_' or '-'",
            )
    return data["profiles"]


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Merge ``override`` over ``base``: mappings merge, anything else replaces.

    A null value in an override removes the key, so a site can drop a
    variable that a built-in profile sets.
    """
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def override_files_from_env(environ: dict[str, str] | None = None) -> list[Path]:
    """Files named in GPUFABRIC_CATALOG (separated like PATH)."""
    value = (environ if environ is not None else os.environ).get(CATALOG_ENV_VAR, "")
    return [Path(part) for part in value.split(os.pathsep) if part]


class Catalog:
    """Validated profiles by name, plus where each one was last defined."""

    def __init__(self, profiles: dict[str, dict[str, Any]], origins: dict[str, str]) -> None:
        self.profiles = profiles
        self.origins = origins
        self._by_instance = {(p["cloud"], p["instance_type"]): name for name, p in profiles.items()}

    def names(self) -> list[str]:
        return sorted(self.profiles)

    def get(self, name: str) -> dict[str, Any] | None:
        return self.profiles.get(name)

    def find(self, cloud: str, instance_type: str) -> str | None:
        """Profile name for a cloud's instance type, or None."""
        return self._by_instance.get((cloud, instance_type))


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


# Catalogs parsed by this process (the cache's misses): the tests and bench/controller_cpu.py read it.
catalog_parses = 0


@_memoized
def load_catalog(
    override_files: list[Path] | None = None,
    builtin_dir: Path = BUILTIN_CATALOG_DIR,
) -> Catalog:
    """Load the built-in catalog, merge overrides in order, validate all."""
    profiles: dict[str, dict[str, Any]] = {}
    origins: dict[str, str] = {}
    builtin_files = sorted(builtin_dir.glob("*.yml"))
    if not builtin_files:
        raise CatalogError(str(builtin_dir), "", "no catalog files (*.yml) found")
    for path in builtin_files:
        for name, profile in _read_yaml(path).items():
            if name in profiles:
                raise CatalogError(str(path), f"profiles.{name}", f"already defined in {origins[name]}")
            profiles[name] = profile
            origins[name] = str(path)
    for path in override_files or []:
        for name, profile in _read_yaml(Path(path)).items():
            if not isinstance(profile, dict):
                raise CatalogError(str(path), f"profiles.{name}", "must be a mapping")
            profiles[name] = _deep_merge(profiles.get(name, {}), profile)
            origins[name] = str(path)
    for name, profile in profiles.items():
        validate_profile(name, profile, origins[name])
    return Catalog(profiles, origins)
