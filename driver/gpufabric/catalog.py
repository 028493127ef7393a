# SPDX-License-Identifier: Apache-2.0
"""The driver's view of the fabric catalog: built-in profiles plus user overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError


def override_files(cli_files: list[Path] | None) -> list[Path]:
    """Overrides from GPUFABRIC_CATALOG first, then --catalog, so the command line wins."""
    return [*plugin_utils("fabric_catalog").override_files_from_env(), *(cli_files or [])]


def input_files(cli_files: list[Path] | None) -> list[tuple[str, Path]]:
    """The override files a command reads, each with where it was named (output_file.refuse_clobbers)."""
    from_env = plugin_utils("fabric_catalog").override_files_from_env()
    return [*(("GPUFABRIC_CATALOG", path) for path in from_env), *(("--catalog", path) for path in cli_files or [])]


def load(cli_files: list[Path] | None = None) -> Any:
    """Load and validate the catalog; a bad file becomes a UserError naming file, key and reason."""
    catalog_module = plugin_utils("fabric_catalog")
    try:
        return catalog_module.load_named_catalog(input_files(cli_files))
    except catalog_module.CatalogError as exc:
        raise UserError(f"catalog error: {exc}") from None


def summary(name: str, profile: dict[str, Any]) -> dict[str, Any]:
    """One row of `gpufabric catalog list`."""
    catalog_module = plugin_utils("fabric_catalog")
    return {
        "name": name,
        "cloud": profile["cloud"],
        "instance_type": profile["instance_type"],
        "fabric": profile["fabric"],
        "gpus": f"{profile['gpu']['count']}x {profile['gpu']['model']}",
        "gpu_nics": f"{profile['nics']['gpu']['count']}x {profile['nics']['gpu']['speed_gbit_s']}G "
        f"{profile['nics']['gpu']['kind']}",
        "line_rate_gbit_s": profile["bandwidth"]["line_rate_gbit_s"],
        "architecture": profile.get("architecture", catalog_module.DEFAULT_ARCHITECTURE),
        # Rack-scale NVLink (NVL72): the GPUs and hosts of one NVLink domain; "-" for a single-host NVLink.
        "nvlink_domain": _nvlink_domain(profile),
        "sources": list(profile.get("sources") or []),
    }


def _nvlink_domain(profile: dict[str, Any]) -> str:
    nvlink = profile.get("nvlink")
    if not nvlink:
        return "-"
    hosts = plugin_utils("fabric_catalog").hosts_per_domain(profile)
    return f"{nvlink['domain_gpus']} GPUs, {hosts} hosts"


def origin_label(origin: tuple[str, str, str]) -> str:
    """Where a value came from, in a few words: 'fabric efa', 'profile', 'override /etc/site.yml'."""
    kind, file, fabric = origin
    if kind == "fabric":
        return f"fabric {fabric}"
    if kind == "override":
        return f"override {file}" + (f" (fabric {fabric})" if fabric else "")
    return "profile"


def provenance(loaded: Any, name: str) -> dict[str, dict[str, str]]:
    """Per value of the resolved profile (a dotted key path; a list is one value): where it came from."""
    out: dict[str, dict[str, str]] = {}
    for path, (kind, file, fabric) in loaded.provenance[name].items():
        out[path] = {"from": kind, "file": file, **({"fabric": fabric} if fabric else {})}
    return out


def annotated(profile: dict[str, Any], origins: dict[str, tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(YAML line, origin label) for `catalog show`: the label on each value's first line, '' elsewhere."""
    lines: list[tuple[str, str]] = []

    def walk(data: dict[str, Any], prefix: str, indent: str) -> None:
        for key, value in data.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and value:
                lines.append((f"{indent}{key}:", ""))
                walk(value, f"{path}.", indent + "  ")
                continue
            text = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, width=1_000_000)
            if isinstance(value, list) and not any(isinstance(item, (dict, list)) for item in value):
                flow = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=True, width=1_000_000)
                if len(flow) <= 100:  # short lists (roles, interfaces) read best on one line
                    text = flow.strip()[1:-1]
            label = origin_label(origins[path]) if path in origins else ""
            for index, line in enumerate(text.rstrip("\n").split("\n")):
                lines.append((indent + line, label if index == 0 else ""))

    walk(profile, "", "")
    return lines
