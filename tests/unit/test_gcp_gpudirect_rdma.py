# SPDX-License-Identifier: Apache-2.0
"""gcp_gpudirect_rdma's logic that molecule cannot reach: Ubuntu, the ar+https transport, NIC faults, env drift."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import Faults, write_tree
from tests.conftest import package_facts, recorded_facts

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "gcp_gpudirect_rdma"
PREFIX = "gcp_gpudirect_rdma_"

gib = module_utils("gcp_gpudirect_rdma")
catalog = plugin_utils("fabric_catalog").load_catalog()
fabric_plan = plugin_utils("fabric_plan")
hw_facts = module_utils("hw_facts")

DEBIAN12 = {"distribution": "Debian", "distribution_version": "12.8", "distribution_major_version": "12"}
DEBIAN13 = {"distribution": "Debian", "distribution_version": "13.1", "distribution_major_version": "13"}
JAMMY = {"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22"}
NOBLE = {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24"}


def defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))


def settings(**overrides: object) -> dict:
    """The role's defaults without the prefix, as plan.yml passes them (the profile comes with the plan)."""
    values = {key[len(PREFIX) :]: value for key, value in defaults().items()}
    values.update(overrides)
    return values


def catalog_plan(profile: str = "gcp/a3-ultragpu-8g") -> dict:
    return fabric_plan.plan_host({"gpufabric_profile": profile}, catalog, tier="best")


MIRROR = {"repo_url": "file:/srv/aptrepo", "repo_keyring": "/etc/apt/keyrings/gpufabric-gib.gpg"}


# ---------------------------------------------------------------------------
# Defaults say what the README says
# ---------------------------------------------------------------------------


def test_defaults_match_the_sources_the_readme_names():
    values = defaults()
    readme = (ROLE / "README.md").read_text(encoding="utf-8")
    expected = {
        "gcp_gpudirect_rdma_version": "1.1.0",
        "gcp_gpudirect_rdma_repo_url": "ar+https://us-apt.pkg.dev/projects/gce-ai-infra",
        "gcp_gpudirect_rdma_repo_suite": "gpudirect-gib-apt",
        "gcp_gpudirect_rdma_repo_key_url": "https://us-apt.pkg.dev/doc/repo-signing-key.gpg",
        "gcp_gpudirect_rdma_ar_transport_repo_url": "https://packages.cloud.google.com/apt",
        "gcp_gpudirect_rdma_ar_transport_repo_suite": "apt-transport-artifact-registry-stable",
        "gcp_gpudirect_rdma_ar_transport_key_url": "https://packages.cloud.google.com/apt/doc/apt-key.gpg",
        "gcp_gpudirect_rdma_env_script": "/usr/local/gib/scripts/set_nccl_env.sh",
    }
    for name, value in expected.items():
        assert str(values[name]) == value, name
        assert value in readme, f"README does not state {name} = {value}"
    assert values["gcp_gpudirect_rdma_repo_components"] == ["main"]
    assert values["gcp_gpudirect_rdma_vendor_env_hooks"] == ["/etc/profile.d/nccl-gib.sh"]
    assert "/etc/profile.d/nccl-gib.sh" in readme


def test_no_default_pretends_to_know_a_checksum_or_the_transport_version():
    values = defaults()
    for name in ("repo_key_checksum", "ar_transport_key_checksum", "ar_transport_version"):
        assert values[PREFIX + name] == "", name
    readme = (ROLE / "README.md").read_text(encoding="utf-8")
    assert "UNVERIFIED" in readme


def test_every_argspec_entry_point_documents_only_known_options():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))["argument_specs"]
    main = specs["main"]["options"]
    for name, spec in specs["verify"]["options"].items():
        assert name in main
        assert spec.get("default") == main[name].get("default"), name


# ---------------------------------------------------------------------------
# Plan
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("facts", [DEBIAN12, DEBIAN13, JAMMY, NOBLE], ids=["debian12", "debian13", "jammy", "noble"])
def test_supported_systems_plan_without_errors(facts):
    plan = gib.plan(settings(**MIRROR), catalog_plan(), facts)
    assert plan["errors"] == []
    assert plan["packages"] == [{"name": "nccl-gib", "version": "1.1.0", "spec": "nccl-gib=1.1.0"}]


# Over the facts ansible-core gathers from each OS's real release files (tests/fixtures/os_release/): the Debian
# releases molecule/gcp_gpudirect_rdma no longer runs on (it runs one Ubuntu 22.04 and one 24.04 identity host),
# and both Ubuntu releases.
@pytest.mark.parametrize("target", ["debian12", "debian13", "ubuntu2204", "ubuntu2404"])
def test_recorded_facts_plan_without_errors(target):
    plan = gib.plan(settings(**MIRROR), catalog_plan(), recorded_facts(target))
    assert plan["errors"] == []
    assert plan["packages"] == [{"name": "nccl-gib", "version": "1.1.0", "spec": "nccl-gib=1.1.0"}]


@pytest.mark.parametrize(
    ("facts", "accepted"),
    [
        ({**JAMMY, "distribution_version": "20.04", "distribution_major_version": "20"}, "Ubuntu 20.04"),
        ({**DEBIAN12, "distribution_version": "11.9", "distribution_major_version": "11"}, "Debian 11.9"),
        ({"distribution": "Rocky", "distribution_version": "9.4", "distribution_major_version": "9"}, "'Rocky'"),
    ],
)
def test_other_systems_are_refused_naming_what_is_accepted(facts, accepted):
    plan = gib.plan(settings(**MIRROR), catalog_plan(), facts)
    assert len(plan["errors"]) == 1
    assert accepted in plan["errors"][0]
    assert "accepted: Debian 12, 13; Ubuntu 22.04, 24.04" in plan["errors"][0]


def test_default_ar_https_repository_needs_the_transport_at_a_pinned_version():
    plan = gib.plan(settings(), catalog_plan(), JAMMY)
    assert plan["transport"] is True
    assert len(plan["errors"]) == 1
    assert "gcp_gpudirect_rdma_ar_transport_version '' is not accepted" in plan["errors"][0]
    assert "apt-cache madison apt-transport-artifact-registry" in plan["errors"][0]


def test_transport_comes_first_and_is_pinned_and_held_with_its_own_keyring():
    plan = gib.plan(settings(ar_transport_version="0.4.1"), catalog_plan(), NOBLE)
    assert plan["errors"] == []
    assert [repo["name"] for repo in plan["repos"]] == ["gpufabric-gib-transport", "gpufabric-gib"]
    transport, gib_repo = plan["transport_repo"], plan["gib_repo"]
    assert transport["url"] == "https://packages.cloud.google.com/apt"
    assert transport["suite"] == "apt-transport-artifact-registry-stable"
    assert transport["keyring"] == "/etc/apt/keyrings/gpufabric-google-cloud-packages.asc"
    assert gib_repo["url"] == "ar+https://us-apt.pkg.dev/projects/gce-ai-infra"
    assert gib_repo["keyring"] == "/etc/apt/keyrings/gpufabric-gib.asc"
    assert plan["transport_packages"] == [
        {"name": "apt-transport-artifact-registry", "version": "0.4.1", "spec": "apt-transport-artifact-registry=0.4.1"}
    ]
    assert plan["holds"] == ["apt-transport-artifact-registry", "nccl-gib"]
    assert plan["pending"] == ["apt-transport-artifact-registry", "nccl-gib"]
    # The vendor_packages runs, transport first, each Signed-By its own keyring, its key installed before it.
    assert plan["transport_install"] == {
        "keys": [
            {
                "repository": "gpufabric-gib-transport",
                "url": transport["key_url"],
                "src": "",
                "dest": "/etc/apt/keyrings/gpufabric-google-cloud-packages.asc",
                "fingerprints": transport["key_fingerprints"],
                "fingerprints_from": "gcp_gpudirect_rdma_ar_transport_key_fingerprints",
                "checksum": transport["key_checksum"],
            }
        ],
        "repositories": [
            {
                "name": "gpufabric-gib-transport",
                "uris": ["https://packages.cloud.google.com/apt"],
                "suites": ["apt-transport-artifact-registry-stable"],
                "components": ["main"],
                "architectures": [],
                "signed_by": "/etc/apt/keyrings/gpufabric-google-cloud-packages.asc",
            }
        ],
        "packages": [
            {
                "name": "apt-transport-artifact-registry",
                "version": "0.4.1",
                "hold": True,
                "repository": "gpufabric-gib-transport",
            }
        ],
        "preferences": "",
        "pin_priority": 1001,
        "release": [],
    }
    assert plan["gib_install"]["repositories"][0]["signed_by"] == "/etc/apt/keyrings/gpufabric-gib.asc"
    assert plan["gib_install"]["packages"] == [
        {"name": "nccl-gib", "version": "1.1.0", "hold": True, "repository": "gpufabric-gib"}
    ]
    assert plan["gib_install"]["keys"][0]["dest"] == "/etc/apt/keyrings/gpufabric-gib.asc"
    # What gpufabric plan shows: both runs, in order.
    assert plan["supply"] == [plan["transport_install"], plan["gib_install"]]


@pytest.mark.parametrize(
    ("url", "needed"),
    [
        ("ar+https://us-apt.pkg.dev/projects/gce-ai-infra", True),
        ("AR+HTTPS://us-apt.pkg.dev/projects/gce-ai-infra", True),
        ("https://packages.cloud.google.com/apt", False),
        ("http://mirror.example.internal/gib", False),
        ("file:/srv/aptrepo", False),
    ],
)
def test_transport_only_for_ar_https(url, needed):
    assert gib.transport_needed(url) is needed
    plan = gib.plan(settings(repo_url=url), catalog_plan(), DEBIAN12)
    assert plan["transport"] is needed
    assert [repo["name"] for repo in plan["repos"]][-1] == "gpufabric-gib"
    # A mirror needs no transport, so its empty version is no error.
    assert bool(plan["errors"]) is needed


@pytest.mark.parametrize(
    ("profile", "tuner"),
    [
        ("gcp/a3-ultragpu-8g", "/usr/local/gib/configs/tuner_config_a3u.txtpb"),
        ("gcp/a4-highgpu-8g", "/usr/local/gib/configs/tuner_config_a4.txtpb"),
    ],
)
def test_files_come_from_the_profile_environment(profile, tuner):
    plan = gib.plan(settings(**MIRROR), catalog_plan(profile), DEBIAN12)
    assert plan["errors"] == []
    assert plan["lib_dirs"] == ["/usr/local/gib/lib64"]
    assert plan["plugin_pattern"] == "libnccl-net*.so"
    assert plan["files"] == [tuner]
    assert plan["env"]["NCCL_NET"] == "gIB"
    assert plan["nics"]["gpu"]["mtu"] == 8896


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("gcp/a3-megagpu-8g", "profile 'gcp/a3-megagpu-8g' has fabric 'tcpxo'"),
        ("gcp/a3-highgpu-8g", "profile 'gcp/a3-highgpu-8g' has fabric 'tcpx'"),
        # The host plan says which profile was asked for and where from.
        ("gcp/nope", "profile 'gcp/nope' from host var gpufabric_profile is not in the catalog; accepted: a profile"),
    ],
)
def test_profiles_of_other_fabrics_are_refused(profile, message):
    plan = gib.plan(settings(**MIRROR), catalog_plan(profile), DEBIAN12)
    assert any(error.startswith(message) for error in plan["errors"]), plan["errors"]
    assert any("gcp/a3-ultragpu-8g, gcp/a4-highgpu-8g" in error for error in plan["errors"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"version": ""}, "gcp_gpudirect_rdma_version '' is not accepted"),
        ({"version": "latest"}, "gcp_gpudirect_rdma_version 'latest' is not accepted"),
        ({"env_fail_on": "always"}, "gcp_gpudirect_rdma_env_fail_on 'always' is not accepted"),
        ({"repo_url": "ftp://mirror/gib"}, "gcp_gpudirect_rdma_repo_url 'ftp://mirror/gib' is not accepted"),
        ({"repo_suite": ""}, "gcp_gpudirect_rdma_repo_suite is empty"),
        (
            {"repo_key_url": "", "repo_key_src": ""},
            "gcp_gpudirect_rdma_repo_key_url and gcp_gpudirect_rdma_repo_key_src are both empty",
        ),
        ({"repo_key_url": "http://x/key.gpg"}, "gcp_gpudirect_rdma_repo_key_url 'http://x/key.gpg' is not accepted"),
        ({"repo_key_checksum": "sha256:abc"}, "gcp_gpudirect_rdma_repo_key_checksum 'abc' is not accepted"),
        ({"repo_keyring": "/etc/apt/keyrings/gib.key"}, "gcp_gpudirect_rdma_repo_keyring '/etc/apt/keyrings/gib.key'"),
        ({"repo_keyring": "gib.asc"}, "gcp_gpudirect_rdma_repo_keyring 'gib.asc' is not accepted"),
        ({"repo_key_fingerprints": []}, "gcp_gpudirect_rdma_repo_key_fingerprints is []; accepted"),
        (
            {"repo_key_fingerprints": ["DC6315A3"]},
            "gcp_gpudirect_rdma_repo_key_fingerprints: fingerprint 'DC6315A3' is not",
        ),
    ],
)
def test_bad_input_is_named_with_what_is_accepted(overrides, message):
    plan = gib.plan(settings(**{**MIRROR, **overrides}), catalog_plan(), DEBIAN12)
    assert any(error.startswith(message) for error in plan["errors"]), plan["errors"]
    assert all("accepted" in error or "needs" in error for error in plan["errors"])


def test_transport_settings_are_checked_only_when_the_transport_is_needed():
    bad = {"ar_transport_keyring": "nope", "ar_transport_key_url": "", "ar_transport_version": "0.4.1"}
    assert gib.plan(settings(**MIRROR, **bad), catalog_plan(), DEBIAN12)["errors"] == []
    errors = gib.plan(settings(**bad), catalog_plan(), DEBIAN12)["errors"]
    assert any(error.startswith("gcp_gpudirect_rdma_ar_transport_keyring 'nope'") for error in errors)
    assert any(error.startswith("gcp_gpudirect_rdma_ar_transport_key_url and") for error in errors)


def test_checksum_is_normalised_for_get_url():
    digest = "A" * 64
    plan = gib.plan(settings(**MIRROR, repo_key_checksum=digest), catalog_plan(), DEBIAN12)
    assert plan["gib_repo"]["key_checksum"] == "sha256:" + "a" * 64
    plan = gib.plan(settings(**MIRROR, repo_key_checksum="sha256:" + digest), catalog_plan(), DEBIAN12)
    assert plan["gib_repo"]["key_checksum"] == "sha256:" + "a" * 64
    assert gib.plan(settings(**MIRROR), catalog_plan(), DEBIAN12)["gib_repo"]["key_checksum"] == ""


def test_catalog_without_library_path_is_refused():
    plan = catalog_plan()
    plan["env"] = {key: value for key, value in plan["env"].items() if key != "LD_LIBRARY_PATH"}
    errors = gib.plan(settings(**MIRROR), plan, DEBIAN12)["errors"]
    assert errors == [
        "the catalog environment of 'gcp/a3-ultragpu-8g' has no LD_LIBRARY_PATH; it must name the directory of "
        "the gIB plugin (/usr/local/gib/lib64)"
    ]


def test_pending_compares_installed_versions():
    installed = {"nccl-gib": [{"version": "1.1.0"}], "apt-transport-artifact-registry": [{"version": "0.4.0"}]}
    facts = {**JAMMY, "packages": installed}
    plan = gib.plan(settings(ar_transport_version="0.4.1"), catalog_plan(), facts)
    assert plan["pending"] == ["apt-transport-artifact-registry"]
    plan = gib.plan(settings(ar_transport_version="0.4.0", version="1.1.1"), catalog_plan(), facts)
    assert plan["pending"] == ["nccl-gib"]


def test_the_transport_is_the_one_gcp_tcpxo_installs_too():
    # One definition (module_utils/gcp_common.py) of the Artifact Registry transport for both roles.
    common, tcpxo = module_utils("gcp_common"), module_utils("gcp_tcpxo")
    plan = gib.plan(settings(ar_transport_version="0.4.1"), catalog_plan(), NOBLE)
    assert [
        {key: pin[key] for key in ("name", "version", "hold")} for pin in plan["transport_install"]["packages"]
    ] == common.transport_packages("0.4.1")
    tcpxo_first = tcpxo.installs({"ar_transport": True, "ar_transport_version": "0.4.1"}, [])["first"]
    assert [
        {key: pin[key] for key in ("name", "version", "hold")} for pin in tcpxo_first["packages"]
    ] == common.transport_packages("0.4.1")
    assert gib.transport_needed is common.transport_needed


def test_the_filter_plugin_returns_the_plan_and_refuses_inputs_that_are_not_dictionaries():
    module = importlib.import_module("ansible_collections.gpufabric.cluster.plugins.filter.gcp_gpudirect_rdma")
    gcp_gpudirect_rdma_plan = module.FilterModule().filters()["gcp_gpudirect_rdma_plan"]
    expected = gib.plan(settings(**MIRROR), catalog_plan(), DEBIAN12)
    assert expected["warnings"] == []
    assert gcp_gpudirect_rdma_plan(settings(**MIRROR), plan=catalog_plan(), facts=DEBIAN12) == expected
    with pytest.raises(AnsibleFilterError, match=re.escape("gcp_gpudirect_rdma_plan: plan= is NoneType None")):
        gcp_gpudirect_rdma_plan(settings(), facts=DEBIAN12)
    with pytest.raises(AnsibleFilterError, match=re.escape("gcp_gpudirect_rdma_plan: its input is str 'x'")):
        gcp_gpudirect_rdma_plan("x", plan=catalog_plan(), facts=DEBIAN12)


def test_both_keys_are_pinned_to_artifact_registrys_fingerprint_by_default():
    plan = gib.plan(settings(ar_transport_version="0.4.1"), catalog_plan(), JAMMY)
    for repo in plan["repos"]:
        assert repo["key_fingerprints"] == ["35BA A0B3 3E9E B396 F59C A838 C0BA 5CE6 DC63 15A3"], repo["name"]
        assert repo["key_variable"].startswith("gcp_gpudirect_rdma_") and repo["key_variable"].endswith("fingerprints")


# ---------------------------------------------------------------------------
# RDMA NICs on SIMULATED hardware
# ---------------------------------------------------------------------------


def simulated(tmp_path: Path, profile: str = "gcp/a3-ultragpu-8g", faults: Faults | None = None) -> dict:
    root = tmp_path / "hw"
    write_tree(catalog.get(profile), root, faults)
    return hw_facts.gather(str(root))


@pytest.mark.parametrize("profile", ["gcp/a3-ultragpu-8g", "gcp/a4-highgpu-8g"])
def test_a_healthy_simulated_host_has_no_finding(tmp_path, profile):
    facts = simulated(tmp_path, profile)
    assert gib.nic_findings(facts, catalog_plan(profile)["nics"]) == []


def test_each_broken_nic_is_named_with_its_fault(tmp_path):
    facts = simulated(tmp_path, faults=Faults(nic_down=3, mtu=(5, 1500)))
    port = next(dev for dev in facts["rdma_devices"] if dev["name"] == "mlx5_2")["ports"][0]
    port["gids"] = [gid for gid in port["gids"] if not gid["gid"].startswith(gib.IPV4_MAPPED)]
    next(dev for dev in facts["rdma_devices"] if dev["name"] == "mlx5_6")["ports"][0]["link_layer"] = "InfiniBand"
    found = gib.nic_findings(facts, catalog_plan()["nics"])
    assert [(item["subject"], item["check"]) for item in found] == [
        ("mlx5_2", "gid"),
        ("mlx5_3", "port_state"),
        ("mlx5_5", "mtu"),
        ("mlx5_6", "link_layer"),
    ]
    messages = " | ".join(item["message"] for item in found)
    assert "mlx5_3 port 1 is DOWN (Disabled); expected ACTIVE" in messages
    assert re.search(r"mlx5_5: enp\w+ MTU is 1500; the profile's RDMA network needs 8896", messages)
    assert "mlx5_6 port 1 link layer is InfiniBand; gIB needs RoCE (Ethernet)" in messages
    assert "mlx5_2 port 1 has no RoCE v2 GID with an IPv4 address" in messages


def test_mtu_above_the_vpc_mtu_is_a_finding_too(tmp_path):
    facts = simulated(tmp_path, faults=Faults(mtu=(0, 9000)))
    found = gib.nic_findings(facts, catalog_plan()["nics"])
    assert [item["message"].split(":")[0] for item in found] == ["mlx5_0"]


def test_missing_nics_are_counted_without_names(tmp_path):
    facts = simulated(tmp_path, faults=Faults(nics_missing=2))
    found = gib.nic_findings(facts, catalog_plan()["nics"])
    assert [item["message"] for item in found] == [
        "found 6 of 8 ConnectX RDMA devices (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5)"
    ]


def test_missing_nics_are_named_when_the_profile_names_them(tmp_path):
    facts = simulated(tmp_path, faults=Faults(nics_missing=1))
    nics = catalog_plan()["nics"]
    nics["gpu"]["rdma_devices"] = [f"mlx5_{index}" for index in range(8)]
    found = gib.nic_findings(facts, nics)
    assert [item["message"] for item in found] == ["mlx5_7: RDMA device missing (the profile names it)"]


def test_facts_without_gid_details_fall_back_to_the_gid_count(tmp_path):
    facts = simulated(tmp_path)
    for dev in facts["rdma_devices"]:
        for port in dev["ports"]:
            port.pop("gids", None)
    facts["rdma_devices"][0]["ports"][0]["gid_count"] = 0
    found = gib.nic_findings(facts, catalog_plan()["nics"])
    assert [item["message"] for item in found] == ["mlx5_0 port 1 has no GID"]


def test_a_device_without_netdev_is_named():
    device = {
        "name": "mlx5_9",
        "kind": "connectx",
        "netdev": None,
        "ports": [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "link_layer": "Ethernet", "gid_count": 2}],
    }
    found = gib.nic_findings({"rdma_devices": [device], "nics": []}, {"gpu": {"count": 1, "mtu": 8896}})
    assert [item["message"] for item in found] == ["mlx5_9 has no network interface; RoCE needs one"]


# ---------------------------------------------------------------------------
# set_nccl_env.sh against the catalog
# ---------------------------------------------------------------------------


def dump(before: dict[str, str], after: dict[str, str]) -> str:
    lines = [f"{key}={value}" for key, value in before.items()]
    lines.append(gib.ENV_MARKER)
    lines += [f"{key}={value}" for key, value in after.items()]
    return "\n".join(lines) + "\n"


def test_script_exports_are_what_sourcing_changed():
    base = {"PATH": "/usr/bin:/bin", "HOME": "/root", "SHLVL": "1", "_": "/usr/bin/env"}
    output = dump(base, {**base, "SHLVL": "2", "_": "/usr/bin/env2", "NCCL_NET": "gIB", "PATH": "/x:/usr/bin:/bin"})
    assert gib.script_exports(output) == {"complete": True, "exports": {"NCCL_NET": "gIB", "PATH": "/x:/usr/bin:/bin"}}


def test_script_that_exits_is_incomplete():
    assert gib.script_exports("PATH=/bin\n") == {"complete": False, "exports": {}}


def test_multi_line_values_do_not_break_the_parse():
    output = dump({"A": "1"}, {"A": "1", "FUNC": "() {  echo", "B": "2"}) + "}\n"
    assert gib.script_exports(output)["exports"] == {"FUNC": "() {  echo", "B": "2"}


def test_same_environment_has_no_difference():
    env = catalog_plan()["env"]
    exports = {key: value for key, value in env.items() if key != "LD_LIBRARY_PATH"}
    assert gib.env_differences(exports, env) == []


def test_nccl_net_mismatch_is_an_error_and_other_drift_a_warning():
    env = catalog_plan()["env"]
    exports = {**env, "NCCL_NET": "IB", "NCCL_IB_TC": "53", "NCCL_DEBUG": "WARN"}
    found = gib.env_differences(exports, env)
    assert [(item["severity"], item["subject"]) for item in found] == [
        ("warning", "NCCL_DEBUG"),
        ("warning", "NCCL_IB_TC"),
        ("error", "NCCL_NET"),
    ]
    assert found[2]["message"] == "NCCL_NET: set_nccl_env.sh sets 'IB'; the catalog sets 'gIB'"
    assert found[0]["message"] == "NCCL_DEBUG: set_nccl_env.sh sets 'WARN'; the catalog does not set it"
    assert [item["subject"] for item in gib.blocking(found, "error")] == ["NCCL_NET"]
    assert len(gib.blocking(found, "warning")) == 3
    assert gib.blocking(found, "never") == []


def test_script_setting_nccl_net_the_catalog_lacks_is_an_error():
    found = gib.env_differences({"NCCL_NET": "gIB"}, {"NCCL_NET_GDR_LEVEL": "PIX"})
    assert [(item["severity"], item["subject"]) for item in found] == [
        ("error", "NCCL_NET"),
        ("info", "NCCL_NET_GDR_LEVEL"),
    ]


def test_library_path_only_needs_the_catalog_directories():
    env = {"LD_LIBRARY_PATH": "/usr/local/gib/lib64"}
    assert gib.env_differences({"LD_LIBRARY_PATH": "/usr/local/gib/lib64:/usr/lib"}, env) == []
    assert gib.env_differences({}, env) == []
    found = gib.env_differences({"LD_LIBRARY_PATH": "/opt/other"}, env)
    assert [(item["severity"], item["message"]) for item in found] == [
        ("warning", "LD_LIBRARY_PATH: set_nccl_env.sh sets '/opt/other', without the catalog's /usr/local/gib/lib64")
    ]


# ---------------------------------------------------------------------------
# Adopt mode: an image's nccl-gib (cluster-toolkit's gIB images hold it) kept at or above the floor
# ---------------------------------------------------------------------------


def adopt_plan(installed: dict[str, str] | None, **overrides: object) -> dict:
    facts = dict(JAMMY)
    if installed is not None:
        facts["packages"] = package_facts(installed)
    return gib.plan(settings(**{"mode": "adopt", **MIRROR, **overrides}), catalog_plan(), facts)


def test_adopt_holds_the_images_nccl_gib_and_configures_no_repository():
    plan = adopt_plan({"nccl-gib": "1.1.1"})
    assert plan["errors"] == [] and plan["adopt"]["found"] == {"nccl-gib": "1.1.1"}
    (step,) = plan["supply"]
    assert step["repositories"] == [] and step["keys"] == [] and step["preferences"] == "gpufabric-gib-adopted"
    assert [(pin["name"], pin["version"], pin["hold"]) for pin in step["packages"]] == [("nccl-gib", "1.1.1", True)]
    assert plan["gib_install"] == step and not plan["transport"] and step["release"] == []
    # The role's verify entry point checks the adopted version.
    assert plan["packages"] == [{"name": "nccl-gib", "version": "1.1.1", "spec": "nccl-gib=1.1.1"}]


def test_adopt_refuses_an_older_nccl_gib_naming_both_versions_and_the_way_out():
    plan = adopt_plan({"nccl-gib": "1.0.6-1"})
    refusal = (
        "gcp_gpudirect_rdma_provision 'adopt': the image's nccl-gib 1.0.6-1 is older than gcp_gpudirect_rdma_version "
        "1.1.0, the floor in adopt mode; accepted: 1.1.0 or newer; lower gcp_gpudirect_rdma_version to keep the "
        "image's, or gcp_gpudirect_rdma_provision 'install' replaces it"
    )
    assert plan["errors"] == [refusal] and plan["adopt"]["refused"] == refusal


def test_adopt_without_nccl_gib_installs_it_into_adopt_modes_file_so_the_next_run_changes_nothing():
    first = adopt_plan({})
    assert first["adopt"]["missing"] == ["nccl-gib"]
    (step,) = first["supply"]
    assert step["repositories"][0]["name"] == "gpufabric-gib" and step["preferences"] == "gpufabric-gib-adopted"
    second = adopt_plan({"nccl-gib": "1.1.0"})

    def pins(install: dict) -> list:  # what vendor_packages writes and holds (the repository only names a source)
        return [(pin["name"], pin["version"], pin["hold"]) for pin in install["packages"]], install["preferences"]

    assert pins(second["gib_install"]) == pins(step)


def test_adopt_without_the_packages_read_shows_nothing_and_says_why():
    plan = adopt_plan(None)
    assert plan["supply"] == [] and plan["adopt"]["known"] is False
    assert "is read on the host" in plan["warnings"][0]


def test_install_mode_releases_adopt_modes_record_and_a_bad_mode_is_refused():
    assert gib.plan(settings(**MIRROR), catalog_plan(), JAMMY)["gib_install"]["release"] == ["gpufabric-gib-adopted"]
    assert (
        "gcp_gpudirect_rdma_provision 'keep' is not accepted; accepted: install, adopt"
        in adopt_plan({}, mode="keep")["errors"]
    )


def test_adopting_the_images_nccl_gib_needs_no_repository_settings():
    """The default ar+https:// repository needs the transport's version to install; holding the image's does not."""
    facts = {**JAMMY, "packages": {"nccl-gib": [{"version": "1.1.1"}]}}
    adopted = gib.plan(settings(mode="adopt"), catalog_plan(), facts)
    assert adopted["errors"] == [] and adopted["adopt"]["found"] == {"nccl-gib": "1.1.1"}
    # Without nccl-gib the image gets it from the repository, which then needs its settings.
    lacking = gib.plan(settings(mode="adopt"), catalog_plan(), {**JAMMY, "packages": {}})
    assert any("gcp_gpudirect_rdma_ar_transport_version" in error for error in lacking["errors"])
