# SPDX-License-Identifier: Apache-2.0
"""The catalog's JSON Schema (jsonschema): every error names the file, the profile, the key path, the bad value
and what is accepted, as one line; the CLI prints it with no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.collection import plugin_utils
from tests.unit.test_fabric_catalog import MEGA
from tests.unit.test_fabric_catalog import override_error as error_of

fabric_catalog = plugin_utils("fabric_catalog")


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        pytest.param(
            MEGA + "    gpu: {count: eight}\n",
            "profiles.gcp/a3-megagpu-8g.gpu.count",
            "must be an integer >= 1; got 'eight'",
            id="wrong-type",
        ),
        pytest.param(
            MEGA + "    gpu: {count: 8.0}\n",
            "profiles.gcp/a3-megagpu-8g.gpu.count",
            "must be an integer >= 1; got 8.0",
            id="float-is-no-integer",
        ),
        pytest.param(
            MEGA + "    gpu: {nvswitch: 'yes'}\n",
            "profiles.gcp/a3-megagpu-8g.gpu.nvswitch",
            "must be true or false; got 'yes'",
            id="string-is-no-boolean",
        ),
        pytest.param(
            MEGA + "    nics: {gpu: {colour: red}}\n",
            "profiles.gcp/a3-megagpu-8g.nics.gpu.colour",
            "unknown key; accepted: count, speed_gbit_s, kind, mtu, pci_ids, rdma_devices",
            id="unknown-key",
        ),
        pytest.param(
            "profiles:\n  gcp/new-8g:\n    cloud: gcp\n    instance_type: new-8g\n",
            "profiles.gcp/new-8g.description",
            "missing required key",
            id="missing-required-key",
        ),
        pytest.param(
            MEGA + "    nics: {gpu: {kind: infiniband}}\n",
            "profiles.gcp/a3-megagpu-8g.nics.gpu.kind",
            "'infiniband' is not accepted; accepted: gvnic, efa, connectx_ib, connectx_roce, ethernet",
            id="bad-enum-value",
        ),
        pytest.param(
            MEGA + "    bandwidth: {thresholds: [{collective: all_reduce, min_nodes: 0, algo: ring, min_size_bytes: 1, "
            "min_busbw_gbyte_s: 1, verified: false, basis: x}]}\n",
            "profiles.gcp/a3-megagpu-8g.bandwidth.thresholds[0].min_nodes",
            "must be an integer >= 1; got 0",
            id="list-of-mappings",
        ),
        *(
            pytest.param(
                MEGA + "    bandwidth: {thresholds: [{collective: all_reduce, min_nodes: 1, algo: ring, "
                f"min_size_bytes: 1, min_busbw_gbyte_s: {value}, verified: false, basis: x}}]}}\n",
                "profiles.gcp/a3-megagpu-8g.bandwidth.thresholds[0].min_busbw_gbyte_s",
                f"must be a positive number (not NaN or infinite); got {shown}",
                id=f"threshold-{shown}",
            )
            for value, shown in ((".nan", "nan"), (".inf", "inf"), ("-.inf", "-inf"), (".NaN", "nan"))
        ),
        pytest.param(
            MEGA + "    nics: {gpu: {speed_gbit_s: .inf}}\n",
            "profiles.gcp/a3-megagpu-8g.nics.gpu.speed_gbit_s",
            "must be a positive number (not NaN or infinite); got inf",
            id="speed-inf",
        ),
        pytest.param(
            MEGA + "    nics: {gpu: {pci_ids: ['15b3:1021', 15B3]}}\n",
            "profiles.gcp/a3-megagpu-8g.nics.gpu.pci_ids",
            "item 1 ('15B3') must be a PCI vendor:device id such as '15b3:1021' (lowercase hex, quoted)",
            id="list-item",
        ),
        pytest.param(
            MEGA + "    tiers: {best: {env: {nccl_debug: INFO}}}\n",
            "profiles.gcp/a3-megagpu-8g.tiers.best.env",
            "variable name 'nccl_debug' must match ^[A-Z_][A-Z0-9_]*$",
            id="mapping-key",
        ),
        pytest.param(
            MEGA + "    tiers: [best]\n",
            "profiles.gcp/a3-megagpu-8g.tiers",
            "must be a mapping; got ['best']",
            id="list-for-mapping",
        ),
    ],
)
def test_a_schema_error_names_file_profile_path_value_and_what_is_accepted(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    error = error_of(tmp_path, text)
    assert (error.key, error.reason) == (key, reason)


def test_a_fabric_and_an_image_are_checked_by_their_schemas(tmp_path: Path) -> None:
    error = error_of(tmp_path, "fabrics:\n  efa:\n    env_rules: {forbid: {NCCL_ALGO: ''}}\n")
    assert (error.key, error.reason) == (
        "fabrics.efa.env_rules.forbid",
        "NCCL_ALGO must say why the fabric forbids it; got ''",
    )
    error = error_of(
        tmp_path, "images:\n  x/y:\n    description: d\n    reference: r\n    os: windows\n    adopt: []\n"
    )
    assert error.key == "images.x/y.os" and error.reason.startswith("'windows' is not accepted; accepted: ubuntu-22.04")


def test_the_schemas_are_valid_json_schema() -> None:
    validator = fabric_catalog._validator_class()
    for schema in (fabric_catalog.PROFILE_SCHEMA, fabric_catalog.FABRIC_SCHEMA, fabric_catalog.IMAGE_SCHEMA):
        validator.check_schema(schema)


def test_the_cli_prints_one_line_and_no_traceback(tmp_path: Path, gpufabric) -> None:
    override = tmp_path / "override.yml"
    override.write_text(MEGA + "    nics: {gpu: {kind: infiniband}}\n", encoding="utf-8")
    result = gpufabric("catalog", "list", "--catalog", str(override))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"error: catalog error: {override}: profiles.gcp/a3-megagpu-8g.nics.gpu.kind: 'infiniband' is not accepted; "
        "accepted: gvnic, efa, connectx_ib, connectx_roce, ethernet"
    )
