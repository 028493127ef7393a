# SPDX-License-Identifier: Apache-2.0
"""The driver's view of the fabric catalog: built-in profiles plus user overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufabric.collection import module_utils
from gpufabric.errors import UserError


def override_files(cli_files: list[Path] | None) -> list[Path]:
    """Overrides from GPUFABRIC_CATALOG first, then --catalog, so the command line wins."""
    return [*module_utils("fabric_catalog").override_files_from_env(), *(cli_files or [])]


def load(cli_files: list[Path] | None = None) -> Any:
    """Load and validate the catalog; a bad file becomes a UserError naming file, key and reason."""
    catalog_module = module_utils("fabric_catalog")
    try:
        return catalog_module.load_catalog(override_files(cli_files))
    except catalog_module.CatalogError as exc:
        raise UserError(f"catalog error: {exc}") from None


def summary(name: str, profile: dict[str, Any]) -> dict[str, Any]:
    """One row of `gpufabric catalog list`."""
    return {
        "name": name,
        "cloud": profile["cloud"],
        "instance_type": profile["instance_type"],
        "fabric": profile["fabric"],
        "gpus": f"{profile['gpu']['count']}x {profile['gpu']['model']}",
        "gpu_nics": f"{profile['nics']['gpu']['count']}x {profile['nics']['gpu']['speed_gbit_s']}G "
        f"{profile['nics']['gpu']['kind']}",
        "line_rate_gbit_s": profile["bandwidth"]["line_rate_gbit_s"],
    }
