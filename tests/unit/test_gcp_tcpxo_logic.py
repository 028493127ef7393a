# SPDX-License-Identifier: Apache-2.0
"""gcp_tcpxo's logic molecule cannot reach: Ubuntu, image references, the guest-config checker, live NICs."""

from __future__ import annotations

import copy
import importlib
import re

import pytest
from ansible.errors import AnsibleFilterError

from gpufabric.collection import module_utils, plugin_utils
from tests.conftest import image_nic_names, recorded_facts

tcpxo = module_utils("gcp_tcpxo")
fabric_nics = module_utils("fabric_nics")
catalog = plugin_utils("fabric_catalog")

DIGEST_A = "sha256:" + "a" * 64
DEBIAN12 = {
    "distribution": "Debian",
    "distribution_major_version": "12",
    "distribution_version": "12.8",
    "architecture": "x86_64",
    "kernel": "6.1.0-37-cloud-amd64",
}
SETTINGS = {
    "gpu_nic_mtu": 0,
    "ar_transport": True,
    "ar_transport_key_url": "https://packages.cloud.google.com/apt/doc/apt-key.gpg",
    "ar_transport_key_checksum": DIGEST_A,
    "ar_transport_key_src": "",
    "ar_transport_keyring": "/etc/apt/keyrings/gpufabric-google-cloud-packages.asc",
    "repo_key_url": "https://us-apt.pkg.dev/doc/repo-signing-key.gpg",
    "repo_key_checksum": DIGEST_A,
    "repo_key_src": "",
    "repo_keyring": "/etc/apt/keyrings/gpufabric-gcp-tcpxo.asc",
    "ar_transport_key_fingerprints": ["35BA A0B3 3E9E B396 F59C A838 C0BA 5CE6 DC63 15A3"],
    "repo_key_fingerprints": ["35BA A0B3 3E9E B396 F59C A838 C0BA 5CE6 DC63 15A3"],
    "ar_transport_repo_url": "https://packages.cloud.google.com/apt",
    "ar_transport_repo_suite": "apt-transport-artifact-registry-stable",
    "ar_transport_version": "",
    "repo_url": "ar+https://us-apt.pkg.dev/projects/gce-ai-infra",
    "repo_suite": "gpudirect-tcpxo-apt",
    "import_helper_version": "1.0.0-1",
    "registry": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo",
    "rxdm_image": "tcpgpudmarxd-dev",
    "rxdm_tag": "v1.0.21",
    "rxdm_digest": DIGEST_A,
    "rxdm_driver_libraries": ["libcuda.so.1", "libnvidia-ml.so.1"],
    "rxdm_driver_lib_dir": "",
    "rxdm_ready_timeout": 120,
    "plugin_image": "nccl-plugin-gpudirecttcpx-dev",
    "plugin_tag": "v1.0.15",
    "plugin_digest": DIGEST_A,
    "plugin_dir": "/var/lib/tcpxo",
    "firewall_extra_interfaces": [],
    "kernel_headers": True,
}


# a3-megagpu-8g's NICs as Google's Ubuntu images name them (tests/fixtures/nic_names.yml); the catalog names none.
MEGA_NAMES = image_nic_names("gcp/a3-megagpu-8g", "ubuntu")
MEGA_GPU_NICS = MEGA_NAMES["gpu"]


def catalog_plan(name: str = "gcp/a3-megagpu-8g") -> dict:
    """What the plan role hands the role for tier best, its NICs named as on Google's images (the fields it reads)."""
    named = fabric_nics.resolve_with_names(
        plugin_utils("fabric_plan").plan_host({"gpufabric_profile": name}, catalog.load_catalog()), MEGA_NAMES
    )
    return {key: copy.deepcopy(named[key]) for key in ("profile", "fabric", "env", "gpus", "nics", "nic_names")}


def test_the_catalog_profile_plans_without_errors():
    plan = tcpxo.plan(SETTINGS, catalog_plan(), DEBIAN12)
    assert plan["errors"] == []
    assert plan["warnings"] == []
    assert plan["interfaces"] == MEGA_GPU_NICS
    assert plan["firewall_interfaces"] == plan["interfaces"]
    assert plan["lib_dir"] == "/usr/local/tcpxo/lib64"
    assert plan["plugin_lib64"] == "/var/lib/tcpxo/lib64"
    assert plan["tuner_config"] == "/usr/local/tcpxo/lib64/a3plus_tuner_config.textproto"
    assert plan["guest_config"] == "/usr/local/tcpxo/lib64/a3plus_guest_config.textproto"
    assert plan["rxdm_ref"] == f"us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev@{DIGEST_A}"
    assert plan["gpu_devices"] == [f"/dev/nvidia{index}" for index in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    assert plan["driver_libraries"] == [
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    ]
    # The catalog profile has no GPU-NIC MTU, so live MTU checks need gcp_tcpxo_gpu_nic_mtu.
    assert plan["mtu"] == 0
    assert tcpxo.plan({**SETTINGS, "gpu_nic_mtu": 8244}, catalog_plan(), DEBIAN12)["mtu"] == 8244


@pytest.mark.parametrize(
    ("facts", "headers"),
    [
        (DEBIAN12, ["linux-headers-6.1.0-37-cloud-amd64", "linux-headers-cloud-amd64"]),
        (
            {**DEBIAN12, "distribution_major_version": "13", "kernel": "6.12.41-1-amd64"},
            ["linux-headers-6.12.41-1-amd64", "linux-headers-amd64"],
        ),
        (
            {"distribution": "Ubuntu", "distribution_major_version": "22", "architecture": "x86_64",
             "kernel": "6.8.0-1015-gcp"},
            ["linux-headers-6.8.0-1015-gcp", "linux-headers-gcp"],
        ),
        (
            {"distribution": "Ubuntu", "distribution_major_version": "24", "architecture": "x86_64",
             "kernel": "6.8.0-45-generic"},
            ["linux-headers-6.8.0-45-generic", "linux-headers-generic"],
        ),
    ],
)  # fmt: skip
def test_supported_distributions_and_their_kernel_headers(facts, headers):
    settings = tcpxo.distro(facts)
    assert settings["error"] == ""
    assert settings["kernel_header_packages"] == headers
    assert settings["packages"] == ["podman", "iptables"]
    assert settings["driver_lib_dir"] == "/usr/lib/x86_64-linux-gnu"
    assert settings["iptables"] == "/usr/sbin/iptables"


# Over the facts ansible-core gathers from each OS's real release files (tests/fixtures/os_release/): the Debian
# releases molecule/gcp_tcpxo no longer runs on (it runs the Ubuntu 22.04 identity image), and both Ubuntu releases.
@pytest.mark.parametrize("target", ["debian12", "debian13", "ubuntu2204", "ubuntu2404"])
def test_recorded_facts_are_supported(target):
    settings = tcpxo.distro(recorded_facts(target, kernel="6.8.0-1015-gcp"))
    assert settings["error"] == ""
    assert settings["packages"] == ["podman", "iptables"]
    assert settings["kernel_header_packages"] == ["linux-headers-6.8.0-1015-gcp", "linux-headers-gcp"]
    assert tcpxo.plan(SETTINGS, catalog_plan(), recorded_facts(target, kernel="6.8.0-1015-gcp"))["errors"] == []


def test_a_kernel_without_flavour_gets_its_exact_headers_only():
    assert tcpxo.kernel_header_packages("6.9.0") == ["linux-headers-6.9.0"]


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ({**DEBIAN12, "distribution_major_version": "11", "distribution_version": "11.9"}, "Debian 11.9 is not"),
        ({**DEBIAN12, "distribution": "Rocky", "distribution_major_version": "9"}, "Rocky"),
        ({**DEBIAN12, "architecture": "aarch64"}, "architecture 'aarch64'"),
    ],
)
def test_unsupported_hosts_are_refused(facts, message):
    errors = tcpxo.plan(SETTINGS, catalog_plan(), facts)["errors"]
    assert len(errors) == 1 and message in errors[0]


def test_unknown_profile_and_other_fabrics_are_refused():
    # The host plan says which profile was asked for and where from (the role's settings hold no profile).
    unknown_plan = plugin_utils("fabric_plan").plan_host({"gpufabric_profile": "gcp/a9"}, catalog.load_catalog())
    unknown = tcpxo.plan(SETTINGS, unknown_plan, DEBIAN12)
    assert unknown["errors"] == [
        "profile 'gcp/a9' from host var gpufabric_profile is not in the catalog; accepted: a profile of fabric "
        "tcpxo such as gcp/a3-megagpu-8g (`gpufabric catalog list` shows them)"
    ]
    # Without the plan's reason, the plan's own profile is named.
    assert tcpxo.plan(SETTINGS, {"profile": "unknown"}, DEBIAN12)["errors"] == [
        "profile 'unknown' is not in the fabric catalog; accepted: a profile of fabric tcpxo such as "
        "gcp/a3-megagpu-8g (`gpufabric catalog list` shows them)"
    ]
    other = tcpxo.plan(SETTINGS, catalog_plan("gcp/a3-highgpu-8g"), DEBIAN12)
    assert any("has fabric 'tcpx'; gcp_tcpxo serves fabric 'tcpxo'" in error for error in other["errors"])


def test_missing_nvlstree_chunk_size_names_the_variable():
    plan = catalog_plan()
    del plan["env"]["NCCL_NVLSTREE_MAX_CHUNKSIZE"]
    errors = tcpxo.plan(SETTINGS, plan, DEBIAN12)["errors"]
    assert errors == [
        "the catalog env of gcp/a3-megagpu-8g lacks NCCL_NVLSTREE_MAX_CHUNKSIZE: with NCCL_NVLS_ENABLE=1 Google's "
        "guest-config checker (plugin v1.0.12 and later) aborts every NCCL job unless it is 131072"
    ]


def test_wrong_nvlstree_chunk_size_and_missing_checker_file_are_refused():
    env = catalog_plan()["env"]
    errors, _warnings = tcpxo.guest_config_findings({**env, "NCCL_NVLSTREE_MAX_CHUNKSIZE": "262144"}, "p")
    assert errors == [
        "the catalog env of p has NCCL_NVLSTREE_MAX_CHUNKSIZE=262144; Google's guest-config checker enforces "
        "131072 (with NCCL_NVLS_ENABLE=1)"
    ]
    del env["NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE"]
    errors, _warnings = tcpxo.guest_config_findings(env, "p")
    assert len(errors) == 1 and "lacks NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE" in errors[0]


def test_simple_profile_needs_its_own_proto_and_no_nvls():
    env = catalog_plan()["env"]
    simple = {
        **{key: value for key, value in env.items() if key != "NCCL_NVLSTREE_MAX_CHUNKSIZE"},
        "NCCL_PROTO": "Simple",
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_TUNER_CONFIG_PATH": "/usr/local/tcpxo/lib64/a3plus_tuner_config_simple.textproto",
        "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": "/usr/local/tcpxo/lib64/a3plus_guest_config_simple.textproto",
    }
    assert tcpxo.guest_config_findings(simple, "p") == ([], [])
    errors, _warnings = tcpxo.guest_config_findings(
        {**simple, "NCCL_PROTO": "Simple,LL128", "NCCL_NVLS_ENABLE": "1"}, "p"
    )
    assert errors == [
        "the catalog env of p has NCCL_PROTO=Simple,LL128; the simple guest config expects NCCL_PROTO=Simple",
        "the catalog env of p uses the simple guest config, which expects NCCL_NVLS_ENABLE=0",
    ]
    mixed = {**simple, "NCCL_TUNER_CONFIG_PATH": env["NCCL_TUNER_CONFIG_PATH"]}
    errors, _warnings = tcpxo.guest_config_findings(mixed, "p")
    assert len(errors) == 1 and "mixes config variants" in errors[0]


def test_nccl_algo_is_only_a_warning():
    plan = catalog_plan()
    plan["env"]["NCCL_ALGO"] = "Ring,Tree"
    result = tcpxo.plan(SETTINGS, plan, DEBIAN12)
    assert result["errors"] == []
    assert result["warnings"] == [
        "the catalog env of gcp/a3-megagpu-8g sets NCCL_ALGO=Ring,Tree: the guest-config checker flags it as "
        "unexpected and Google recommends leaving it unset (plugin v1.0.12 and later)"
    ]


def test_plugin_directory_must_be_on_the_library_path():
    plan = catalog_plan()
    plan["env"]["LD_LIBRARY_PATH"] = "/usr/local/nvidia/lib64"
    errors = tcpxo.plan(SETTINGS, plan, DEBIAN12)["errors"]
    assert errors == [
        "the catalog env of gcp/a3-megagpu-8g has LD_LIBRARY_PATH=/usr/local/nvidia/lib64, which lacks the plugin "
        "directory /usr/local/tcpxo/lib64 its tuner and checker configs are in"
    ]


def test_nic_names_must_agree_with_the_env():
    plan = catalog_plan()
    plan["nics"]["gpu"]["interfaces"] = [f"eth{i}" for i in range(1, 5)] + MEGA_GPU_NICS[4:]
    errors = tcpxo.plan(SETTINGS, plan, DEBIAN12)["errors"]
    assert len(errors) == 1 and "NCCL_FASTRAK_IFNAME=enp6s0,enp7s0" in errors[0] and "eth1" in errors[0]
    plan = catalog_plan()
    plan["nics"]["gpu"]["interfaces"] = ["eth1"]
    errors = tcpxo.plan(SETTINGS, plan, DEBIAN12)["errors"]
    assert any("the plan of gcp/a3-megagpu-8g names 1 of this host's 8 GPU NICs" in error for error in errors)


def test_a_plan_that_has_not_named_the_hosts_nics_is_refused_once():
    """The catalog names no NIC: a plan the plan role did not name them in still holds {nics.*} placeholders."""
    unnamed = plugin_utils("fabric_plan").plan_host({"gpufabric_profile": "gcp/a3-megagpu-8g"}, catalog.load_catalog())
    assert unnamed["nic_names"] is None and "{nics.gpu}" in unnamed["env"]["NCCL_FASTRAK_IFNAME"]
    errors = tcpxo.plan(SETTINGS, unnamed, DEBIAN12)["errors"]
    assert len(errors) == 1
    assert errors[0].startswith("the plan of profile 'gcp/a3-megagpu-8g' has not named this host's GPU NICs")
    assert "gpufabric_nic_names" in errors[0]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"import_helper_version": ""}, "gcp_tcpxo_import_helper_version '' is not accepted"),
        ({"rxdm_digest": ""}, "gcp_tcpxo_rxdm_digest '' is not accepted"),
        ({"plugin_digest": "sha256:abc"}, "gcp_tcpxo_plugin_digest 'sha256:abc' is not accepted"),
        ({"registry": "https://us-docker.pkg.dev/x"}, "gcp_tcpxo_registry 'https://us-docker.pkg.dev/x'"),
        ({"repo_key_fingerprints": []}, "gcp_tcpxo_repo_key_fingerprints is []; accepted"),
        ({"repo_key_src": "/tmp/k.gpg", "repo_key_fingerprints": ["DC6315A3"]}, "fingerprint 'DC6315A3' is not"),
        ({"ar_transport_key_checksum": "md5:1"}, "gcp_tcpxo_ar_transport_key_checksum 'md5:1' is not accepted"),
        ({"repo_key_url": "http://x/key"}, "gcp_tcpxo_repo_key_url 'http://x/key' is not accepted"),
        ({"repo_keyring": "/etc/apt/keyrings/k.key"}, "gcp_tcpxo_repo_keyring '/etc/apt/keyrings/k.key' is not"),
        ({"repo_url": "ftp://mirror"}, "gcp_tcpxo_repo_url 'ftp://mirror' is not accepted"),
        ({"rxdm_ready_timeout": 0}, "gcp_tcpxo_rxdm_ready_timeout 0 is not accepted"),
        ({"gpu_nic_mtu": -1}, "gcp_tcpxo_gpu_nic_mtu -1 is not accepted"),
        ({"firewall_extra_interfaces": ["eth0; rm"]}, "interface name 'eth0; rm' is not accepted"),
        ({"firewall_extra_interfaces": ["é" * 8]}, "interface name 'éééééééé' is not accepted (16 bytes long)"),
        ({"firewall_extra_interfaces": ["eth0\n"]}, "interface name 'eth0\\n' is not accepted"),
        ({"rxdm_tag": "v1.0.20"}, "gcp_tcpxo_rxdm_tag v1.0.20 does not belong with gcp_tcpxo_plugin_tag v1.0.15"),
        ({"ar_transport_version": "latest"}, "gcp_tcpxo_ar_transport_version 'latest' is not accepted"),
        ({"rxdm_driver_libraries": ["/lib/libcuda.so.1"]}, "entry '/lib/libcuda.so.1' is not accepted"),
    ],
)
def test_bad_input_is_refused_with_the_variable_named(override, message):
    errors = tcpxo.plan({**SETTINGS, **override}, catalog_plan(), DEBIAN12)["errors"]
    assert len(errors) == 1, errors
    assert message in errors[0]


def test_the_checksum_is_optional_and_no_transport_needs_no_transport_key():
    settings = {**SETTINGS, "repo_key_checksum": "", "repo_key_src": "/tmp/key.gpg"}
    assert tcpxo.plan(settings, catalog_plan(), DEBIAN12)["errors"] == []
    assert tcpxo.plan({**SETTINGS, "repo_key_checksum": ""}, catalog_plan(), DEBIAN12)["errors"] == []
    settings = {**SETTINGS, "ar_transport": False, "ar_transport_key_checksum": "", "ar_transport_keyring": ""}
    assert tcpxo.plan(settings, catalog_plan(), DEBIAN12)["errors"] == []


def test_unknown_release_pairs_only_warn():
    result = tcpxo.plan({**SETTINGS, "plugin_tag": "v1.0.16", "rxdm_tag": "v1.0.22"}, catalog_plan(), DEBIAN12)
    assert result["errors"] == []
    assert len(result["warnings"]) == 1 and "v1.0.16 is not in the role's release table" in result["warnings"][0]


def test_extra_firewall_interfaces_are_added_once():
    extra = {**SETTINGS, "firewall_extra_interfaces": ["enp0s12", "enp6s0"]}
    result = tcpxo.plan(extra, catalog_plan(), DEBIAN12)
    assert result["firewall_interfaces"] == [*MEGA_GPU_NICS, "enp0s12"]


def test_nic_findings_name_each_missing_down_or_small_nic():
    hardware = {
        "nics": [
            {"name": "eth1", "operstate": "up", "mtu": 8244},
            {"name": "eth2", "operstate": "down", "mtu": 8244},
            {"name": "eth3", "operstate": "up", "mtu": 1460},
        ]
    }
    assert tcpxo.nic_findings(hardware, ["eth1", "eth2", "eth3", "eth4"], 8244) == [
        "eth2 is down (operstate), not up",
        "eth3 has MTU 1460, below 8244",
        "eth4 is missing",
    ]
    assert tcpxo.nic_findings(hardware, ["eth1", "eth3"], 0) == []


def pending(request: list[dict], installed: dict) -> list[str]:
    """What vendor_packages would install or move for one phase (the module's own pending())."""
    return module_utils("vendor_packages").pending(request, installed)


def names_versions_holds(step: dict) -> list[dict]:
    """A step's packages in pending()'s layout."""
    return [{key: pin[key] for key in ("name", "version", "hold")} for pin in step["packages"]]


def test_packages_pending_holds_and_transport():
    settings = {**SETTINGS, "ar_transport_version": "20220622.00-1"}
    requests = tcpxo.installs(settings, ["podman", "iptables"])
    assert requests["first"]["packages"] == [
        {"name": "apt-transport-artifact-registry", "version": "20220622.00-1", "hold": True,
         "repository": "gpufabric-gcp-ar-transport"},
        {"name": "podman", "version": "", "hold": False, "repository": ""},
        {"name": "iptables", "version": "", "hold": False, "repository": ""},
    ]  # fmt: skip
    assert requests["tcpxo"]["packages"] == [
        {"name": "dmabuf-import-helper", "version": "1.0.0-1", "hold": True, "repository": "gpufabric-gcp-tcpxo"}
    ]
    first, helper = names_versions_holds(requests["first"]), names_versions_holds(requests["tcpxo"])
    fresh = {"podman": [{"version": "4.3.1"}]}
    assert pending(first, fresh) == ["apt-transport-artifact-registry", "iptables"]
    assert pending(helper, fresh) == ["dmabuf-import-helper"]
    installed = {
        "dmabuf-import-helper": [{"version": "1.0.0-1"}],
        "apt-transport-artifact-registry": [{"version": "20220622.00-1"}],
        "podman": [{"version": "4.3.1"}],
        "iptables": [{"version": "1.8.9-2"}],
    }
    assert pending(first, installed) == [] and pending(helper, installed) == []
    moved = tcpxo.installs({**settings, "import_helper_version": "1.0.1-1"}, [])
    assert pending(names_versions_holds(moved["tcpxo"]), installed) == ["dmabuf-import-helper"]


def test_each_run_has_its_repository_and_the_key_that_signs_it():
    requests = tcpxo.installs(SETTINGS, [])
    transport, helper = requests["first"], requests["tcpxo"]
    assert transport["repositories"] == [
        {"name": "gpufabric-gcp-ar-transport", "uris": ["https://packages.cloud.google.com/apt"],
         "suites": ["apt-transport-artifact-registry-stable"], "components": ["main"], "architectures": [],
         "signed_by": "/etc/apt/keyrings/gpufabric-google-cloud-packages.asc"},
    ]  # fmt: skip
    assert transport["keys"] == [
        {"repository": "gpufabric-gcp-ar-transport", "url": SETTINGS["ar_transport_key_url"], "src": "",
         "dest": "/etc/apt/keyrings/gpufabric-google-cloud-packages.asc",
         "fingerprints": SETTINGS["ar_transport_key_fingerprints"],
         "fingerprints_from": "gcp_tcpxo_ar_transport_key_fingerprints", "checksum": DIGEST_A},
    ]  # fmt: skip
    assert helper["repositories"][0]["uris"] == ["ar+https://us-apt.pkg.dev/projects/gce-ai-infra"]
    assert helper["repositories"][0]["architectures"] == ["all"]
    assert helper["keys"][0]["dest"] == helper["repositories"][0]["signed_by"] == SETTINGS["repo_keyring"]
    # A key file from the controller wins over the URL.
    local = tcpxo.installs({**SETTINGS, "repo_key_src": "/srv/keys/tcpxo.gpg"}, [])["tcpxo"]["keys"][0]
    assert (local["src"], local["url"]) == ("/srv/keys/tcpxo.gpg", "")


def test_the_plan_installs_the_build_packages_only_with_kernel_headers():
    plan = tcpxo.plan(SETTINGS, catalog_plan(), DEBIAN12)
    assert plan["supply"] == [plan["first_install"], plan["tcpxo_install"]]
    names = [pin["name"] for pin in plan["first_install"]["packages"]]
    assert names == [
        "apt-transport-artifact-registry", "podman", "iptables", "dkms", "linux-headers-6.1.0-37-cloud-amd64",
        "linux-headers-cloud-amd64",
    ]  # fmt: skip
    plan = tcpxo.plan({**SETTINGS, "kernel_headers": False, "ar_transport": False}, catalog_plan(), DEBIAN12)
    assert [pin["name"] for pin in plan["first_install"]["packages"]] == ["podman", "iptables"]
    assert plan["first_install"]["repositories"] == plan["first_install"]["keys"] == []
    # With the compiler that built the running kernel where a distribution's gcc did (Debian 12's: gcc-12).
    debian_kernel = "Linux version 6.1.0-37-cloud-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12"
    plan = tcpxo.plan({**SETTINGS, "kernel_version_text": debian_kernel}, catalog_plan(), DEBIAN12)
    assert [pin["name"] for pin in plan["first_install"]["packages"]][-1] == "gcc-12"


def test_unpinned_transport_is_installed_once_and_not_held():
    settings = {**SETTINGS, "ar_transport_version": ""}
    first = names_versions_holds(tcpxo.installs(settings, [])["first"])
    assert first == [{"name": "apt-transport-artifact-registry", "version": "", "hold": False}]
    assert pending(first, {}) == ["apt-transport-artifact-registry"]
    installed = {"apt-transport-artifact-registry": [{"version": "20250101.00-1"}]}
    assert pending(first, installed) == []
    assert tcpxo.installs({**settings, "ar_transport": False}, [])["first"]["packages"] == []


def test_env_differences_read_googles_profile():
    env = catalog_plan()["env"]
    script = "\n".join(
        f"export {name}={value.replace('/usr/local/tcpxo/lib64', '${NCCL_LIB_DIR}')}"
        for name, value in env.items()
        if name.startswith("NCCL_")
    )
    assert tcpxo.env_differences(script, env, "/usr/local/tcpxo/lib64") == []
    changed = script.replace("NCCL_MIN_NCHANNELS=4", "NCCL_MIN_NCHANNELS=8") + '\nexport NCCL_ALGO="Ring,Tree"\n'
    assert tcpxo.env_differences(changed, env, "/usr/local/tcpxo/lib64") == [
        "NCCL_MIN_NCHANNELS is 4 in the catalog env, 8 in Google's profile",
        "NCCL_ALGO=Ring,Tree is in Google's profile but not in the catalog env",
    ]
    assert tcpxo.env_differences("# nothing exported\n", env, "/x") == []


def test_the_filter_plugin_returns_the_plan_and_refuses_inputs_that_are_not_dictionaries():
    module = importlib.import_module("ansible_collections.gpufabric.cluster.plugins.filter.gcp_tcpxo")
    gcp_tcpxo_plan = module.FilterModule().filters()["gcp_tcpxo_plan"]
    assert gcp_tcpxo_plan(SETTINGS, plan=catalog_plan(), facts=DEBIAN12) == tcpxo.plan(
        SETTINGS, catalog_plan(), DEBIAN12
    )
    with pytest.raises(AnsibleFilterError, match=re.escape("gcp_tcpxo_plan: plan= is NoneType None; accepted")):
        gcp_tcpxo_plan(SETTINGS, facts=DEBIAN12)
    with pytest.raises(AnsibleFilterError, match=re.escape("gcp_tcpxo_plan: facts= is list []; accepted")):
        gcp_tcpxo_plan(SETTINGS, plan=catalog_plan(), facts=[])


@pytest.mark.parametrize("kernel", ["6.13.0-1001-gcp", "6.17.0-1004-gcp", "7.0.0-1-cloud-amd64"])
def test_a_kernel_from_6_13_is_refused_before_dmabuf_import_helper_fails_to_build(kernel):
    """MODULE_IMPORT_NS takes a string from Linux 6.13; the helper's DKMS source has the identifier form."""
    errors = tcpxo.plan(SETTINGS, catalog_plan(), {**DEBIAN12, "kernel": kernel})["errors"]
    (error,) = [error for error in errors if "dmabuf-import-helper" in error]
    assert error.startswith(f"dmabuf-import-helper {SETTINGS['import_helper_version']} does not build for the running")
    assert f"kernel {kernel}" in error and "gcp_tcpxo_import_helper_kernel_check false" in error


@pytest.mark.parametrize(
    ("kernel", "checked"), [("6.12.41-1-amd64", True), ("6.8.0-1015-gcp", True), ("6.17.0-1", False)]
)
def test_older_kernels_and_a_check_turned_off_plan_the_helper(kernel, checked):
    facts = {**DEBIAN12, "kernel": kernel}
    settings = {**SETTINGS, "import_helper_kernel_check": checked}
    assert not [error for error in tcpxo.plan(settings, catalog_plan(), facts)["errors"] if "dmabuf" in error]
