# SPDX-License-Identifier: Apache-2.0
"""The real `gpufabric` command: JSON shapes, exit codes, and errors without tracebacks."""

from __future__ import annotations

import json

from gpufabric import __version__
from unit.test_fabric_catalog import REQUIRED_PROFILES

PLAN_KEYS = {"profile", "fabric", "tier", "roles", "env"}


def assert_clean_error(result, *fragments: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    message = " ".join(result.stderr.split())
    for fragment in fragments:
        assert fragment in message


def test_catalog_list_json_lists_every_profile(gpufabric):
    result = gpufabric("catalog", "list", "--json")
    assert result.returncode == 0, result.stderr
    names = [row["name"] for row in json.loads(result.stdout)["profiles"]]
    assert set(REQUIRED_PROFILES) <= set(names)


def test_catalog_list_table(gpufabric):
    result = gpufabric("catalog", "list")
    assert result.returncode == 0
    assert "gcp/a3-megagpu-8g" in result.stdout
    assert "tcpxo" in result.stdout


def test_catalog_show_json_and_text(gpufabric):
    shown = json.loads(gpufabric("catalog", "show", "aws/p5.48xlarge", "--json").stdout)
    assert shown["name"] == "aws/p5.48xlarge"
    assert shown["fabric"] == "efa"
    assert shown["source"].endswith("catalog/aws.yml")
    text = gpufabric("catalog", "show", "aws/p5.48xlarge").stdout
    assert "FI_PROVIDER" in text


def test_catalog_show_says_where_each_value_came_from(gpufabric, tmp_path):
    site = tmp_path / "site.yml"
    site.write_text(
        "fabrics:\n  efa:\n    tiers: {best: {env: {FI_EFA_FORK_SAFE: '1'}}}\n"
        "profiles:\n  aws/p5.48xlarge:\n    tiers: {best: {env: {NCCL_DEBUG: INFO}}}\n",
        encoding="utf-8",
    )
    shown = json.loads(gpufabric("catalog", "show", "aws/p5.48xlarge", "--json", "--catalog", str(site)).stdout)
    provenance = shown["provenance"]
    assert provenance["tiers.best.env.FI_PROVIDER"]["from"] == "fabric"
    assert provenance["tiers.best.env.FI_PROVIDER"]["fabric"] == "efa"
    assert provenance["tiers.best.env.FI_PROVIDER"]["file"].endswith("catalog/fabrics.yml")
    assert provenance["tiers.best.roles"]["from"] == "fabric"
    assert provenance["nics.gpu.count"]["from"] == "profile"
    assert provenance["nics.gpu.count"]["file"].endswith("catalog/aws.yml")
    assert provenance["tiers.best.env.FI_EFA_FORK_SAFE"] == {"from": "override", "file": str(site), "fabric": "efa"}
    assert provenance["tiers.best.env.NCCL_DEBUG"] == {"from": "override", "file": str(site)}
    assert shown["tiers"]["best"]["env"]["FI_EFA_FORK_SAFE"] == "1"

    lines = gpufabric("catalog", "show", "aws/p5.48xlarge", "--catalog", str(site)).stdout.splitlines()
    labelled = {line.split(":")[0].strip(): line.rsplit("# ", 1)[-1] for line in lines if "# " in line}
    assert labelled["FI_PROVIDER"] == "fabric efa"
    assert labelled["roles"] == "fabric efa"
    assert labelled["line_rate_gbit_s"] == "profile"
    assert labelled["NCCL_DEBUG"] == f"override {site}"
    assert labelled["FI_EFA_FORK_SAFE"] == f"override {site} (fabric efa)"
    assert any(line.startswith("# fabric efa = ") and line.endswith("catalog/fabrics.yml") for line in lines)


def test_catalog_show_unknown_profile(gpufabric):
    assert_clean_error(gpufabric("catalog", "show", "aws/p9"), "no profile 'aws/p9'", "gpufabric catalog list")


def test_plan_json_shape_for_the_sample_fleet(gpufabric):
    result = gpufabric("plan", "-i", "inventories/sample", "--json")
    assert result.returncode == 0, result.stderr
    hosts = json.loads(result.stdout)["hosts"]
    assert len(hosts) >= 10
    for name, plan in hosts.items():
        assert set(plan) >= PLAN_KEYS, name
        assert isinstance(plan["roles"], list)
        assert isinstance(plan["env"], dict)
    assert hosts["a3mega-0"]["profile"] == "gcp/a3-megagpu-8g"
    assert hosts["a3mega-0"]["fabric"] == "tcpxo"
    assert hosts["a3high-0"]["tier"] == "standard"
    assert hosts["hgx-ib-0"]["fabric"] == "infiniband"
    assert hosts["n2-cpu-0"]["profile"] == "unknown"
    fabrics = {plan["fabric"] for plan in hosts.values()}
    assert {"tcpxo", "gpudirect_rdma", "efa", "infiniband", "roce"} <= fabrics


def test_plan_table_shows_hosts_env_and_warnings(gpufabric):
    result = gpufabric("plan", "-i", "inventories/sample")
    assert result.returncode == 0, result.stderr
    assert "a3mega-0" in result.stdout
    # Without --probe the plan shows the NICs by placeholder: the host's own names fill them (docs/catalog.md).
    assert "NCCL_FASTRAK_CTRL_DEV={nics.management}" in result.stdout
    assert "n2-cpu-0: no catalog profile for gcp instance type 'n2-standard-8'" in " ".join(result.stdout.split())


def test_plan_tier_option_overrides_every_host(gpufabric):
    hosts = json.loads(gpufabric("plan", "-i", "inventories/sample", "--tier", "standard", "--json").stdout)["hosts"]
    assert {plan["tier"] for plan in hosts.values()} == {"standard"}


def test_plan_unknown_tier(gpufabric):
    assert_clean_error(
        gpufabric("plan", "-i", "inventories/sample", "--tier", "gold"),
        "unknown tier 'gold' (--tier); accepted: best, standard",
    )


def test_plan_unknown_tier_in_host_var_names_the_host(gpufabric, tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    node-a:\n      gpufabric_tier: gold\n", encoding="utf-8")
    assert_clean_error(gpufabric("plan", "-i", str(inventory)), "host node-a:", "host var gpufabric_tier")


def test_plan_unreadable_inventory(gpufabric, tmp_path):
    assert_clean_error(gpufabric("plan", "-i", str(tmp_path / "missing.yml")), "cannot read inventory")


def test_an_inventory_plugins_own_error_is_shown(gpufabric, tmp_path):
    """Not the yaml plugin's "Plugin configuration YAML file, not YAML inventory", which only says the file was
    meant for another plugin (issue 42: every gpu_fleet configuration error read that way)."""
    config = tmp_path / "fleet.gpu_fleet.yml"
    config.write_text("plugin: gpufabric.cluster.gpu_fleet\nsource: nocloud\n", encoding="utf-8")
    result = gpufabric("plan", "-i", str(config))
    assert_clean_error(result, "Invalid value 'nocloud' for config 'source'", "(auto inventory plugin)")
    assert "not YAML inventory" not in result.stderr


def test_malformed_catalog_override_from_option(gpufabric, tmp_path):
    bad = tmp_path / "site.yml"
    bad.write_text("profiles:\n  aws/p5.48xlarge:\n    fabric: warp\n", encoding="utf-8")
    assert_clean_error(
        gpufabric("catalog", "list", "--catalog", str(bad)),
        f"catalog error: {bad}: profiles.aws/p5.48xlarge.fabric:",
        "'warp' is not accepted",
    )


def test_catalog_override_from_environment(gpufabric, tmp_path):
    override = tmp_path / "site.yml"
    override.write_text(
        "profiles:\n  aws/p5.48xlarge:\n    tiers: {best: {env: {NCCL_DEBUG: INFO}}}\n", encoding="utf-8"
    )
    result = gpufabric("catalog", "show", "aws/p5.48xlarge", "--json", env={"GPUFABRIC_CATALOG": str(override)})
    assert json.loads(result.stdout)["tiers"]["best"]["env"]["NCCL_DEBUG"] == "INFO"
    bad = tmp_path / "bad.yml"
    bad.write_text(":\n  - [", encoding="utf-8")
    assert_clean_error(gpufabric("plan", "-i", "inventories/sample", env={"GPUFABRIC_CATALOG": str(bad)}), str(bad))


def test_version(gpufabric):
    result = gpufabric("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == __version__
