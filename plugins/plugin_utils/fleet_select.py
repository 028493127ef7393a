# SPDX-License-Identifier: Apache-2.0
"""Which discovered instances an inventory keeps, and what each is called: the gpu_fleet plugin's
``filters`` / ``include_filters`` / ``exclude_filters`` and ``hostnames``, as amazon.aws.aws_ec2 has them.

aws_ec2 hands its filters to the EC2 API; these work on the instances every source reports in one
shape (fleet_base.Instance), so they read the same for every cloud and the static file. A filter is a
mapping of key to a value or a list of values, shell-style patterns (``p5.*``); an instance matches
when every key matches one of its values. The keys are the instance's fields and its tags or labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import Instance

FIELDS = ("name", "instance_id", "instance_type", "state", "region", "zone", "placement", "private_ip", "public_ip")
TAG_PREFIX = "tag:"
ACCEPTED_KEYS = f"{', '.join(FIELDS)}, {TAG_PREFIX}KEY (a tag or label)"


class SelectionError(ValueError):
    """A filter or hostnames preference that cannot be used; the message names it and what is accepted."""


def value_of(instance: Instance, key: str) -> str | None:
    """The instance's value for a filter key or hostnames preference; None when it has none."""
    value = instance.tags.get(key.removeprefix(TAG_PREFIX)) if key.startswith(TAG_PREFIX) else getattr(instance, key)
    return value or None


def _check_key(key: Any, where: str) -> None:
    if not isinstance(key, str) or not (key in FIELDS or (key.startswith(TAG_PREFIX) and len(key) > len(TAG_PREFIX))):
        raise SelectionError(f"{where}: unknown key {key!r}; accepted: {ACCEPTED_KEYS}")


def _patterns(value: Any, where: str) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(item, (str, int)) and not isinstance(item, bool) for item in values):
        raise SelectionError(f"{where}: {value!r} is not a pattern or a list of patterns (text)")
    return [str(item) for item in values]


def check_filter(spec: Any, where: str) -> dict[str, list[str]]:
    """A filter as key -> patterns, or SelectionError naming where it came from."""
    if not isinstance(spec, Mapping):
        raise SelectionError(f"{where}: {spec!r} is not a mapping of key to pattern(s)")
    checked = {}
    for key, value in spec.items():
        _check_key(key, where)
        checked[key] = _patterns(value, f"{where}.{key}")
    return checked


def matches(instance: Instance, spec: Mapping[str, list[str]]) -> bool:
    """Every key has a value matching one of its patterns (an empty filter matches every instance)."""
    for key, patterns in spec.items():
        value = value_of(instance, key)
        if value is None or not any(fnmatchcase(value, pattern) for pattern in patterns):
            return False
    return True


def select(
    instances: Iterable[Instance],
    filters: Mapping[str, Any] | None = None,
    include_filters: list[Any] | None = None,
    exclude_filters: list[Any] | None = None,
) -> list[Instance]:
    """aws_ec2's rule: kept when it matches ``filters`` or any of ``include_filters``, unless it matches
    any of ``exclude_filters`` (exclusion wins). All filters are checked before any instance is."""
    required = check_filter(filters or {}, "filters")
    included = [check_filter(spec, f"include_filters[{n}]") for n, spec in enumerate(include_filters or [])]
    excluded = [check_filter(spec, f"exclude_filters[{n}]") for n, spec in enumerate(exclude_filters or [])]
    return [
        instance
        for instance in instances
        if (matches(instance, required) or any(matches(instance, spec) for spec in included))
        and not any(matches(instance, spec) for spec in excluded)
    ]


def check_hostnames(preferences: list[Any] | None) -> list[dict[str, str]]:
    """``hostnames`` entries as {name, prefix, separator}: a key, or a mapping with ``name`` and an
    optional ``prefix`` key whose value goes first, joined by ``separator`` (default ``_``)."""
    checked = []
    for number, entry in enumerate(preferences or []):
        where = f"hostnames[{number}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise SelectionError(f"{where}: {entry!r} is not a key nor a mapping with 'name'")
        unknown = sorted(set(entry) - {"name", "prefix", "separator"})
        if unknown:
            raise SelectionError(f"{where}: unknown setting {unknown[0]!r}; accepted: name, prefix, separator")
        _check_key(entry["name"], f"{where}.name")
        if "prefix" in entry:
            _check_key(entry["prefix"], f"{where}.prefix")
        separator = entry.get("separator", "_")
        if not isinstance(separator, str):
            raise SelectionError(f"{where}.separator: {separator!r} is not text")
        checked.append({"name": entry["name"], "prefix": entry.get("prefix", ""), "separator": separator})
    return checked


def preferred_hostname(instance: Instance, preferences: list[dict[str, str]]) -> str | None:
    """The first preference that gives the instance a value (with its prefix's value, when it has one)."""
    for preference in preferences:
        value = value_of(instance, preference["name"])
        if value is None:
            continue
        if not preference["prefix"]:
            return value
        prefix = value_of(instance, preference["prefix"])
        if prefix is not None:
            return f"{prefix}{preference['separator']}{value}"
    return None
