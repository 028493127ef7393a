# SPDX-License-Identifier: Apache-2.0
"""aws_efa's logic that molecule cannot reach: defaults against AWS's published data, installer flags
for bake and live mode, distribution and plugin support per installer version, the version marker, the
library checks on Ubuntu's layout and fi_info parsing."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from gpufabric.collection import module_utils
from tests.conftest import recorded_facts

efa = module_utils("aws_efa")

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((REPO / "roles" / "aws_efa" / "defaults" / "main.yml").read_text(encoding="utf-8"))
ARGSPEC = yaml.safe_load((REPO / "roles" / "aws_efa" / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
CATALOG_LD_PATH = "/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:/opt/amazon/openmpi/lib"

DEBIAN12 = {"distribution": "Debian", "distribution_version": "12.8", "os_family": "Debian", "architecture": "x86_64"}
UBUNTU2204 = {
    "distribution": "Ubuntu",
    "distribution_version": "22.04",
    "os_family": "Debian",
    "architecture": "x86_64",
}
UBUNTU2404 = {
    "distribution": "Ubuntu",
    "distribution_version": "24.04",
    "os_family": "Debian",
    "architecture": "x86_64",
}
DEBIAN13 = {"distribution": "Debian", "distribution_version": "13.1", "os_family": "Debian", "architecture": "x86_64"}
AL2023 = {"distribution": "Amazon", "distribution_version": "2023", "os_family": "RedHat", "architecture": "x86_64"}
SHA = "a" * 64

MARKER_1_22 = """# EFA installer version: 1.22.0
# Debug packages installed: no
# Packages installed:
efa-config-1.13-1.el8.noarch efa-profile-1.5-1.el8.noarch libfabric-aws-1.17.0-1.el8.x86_64
"""

# AWS EC2 User Guide, efa-start-nccl: fi_info -p efa -t FI_EP_RDM on a p4d.24xlarge (4 EFA).
FI_INFO_P4D = """provider: efa
    fabric: EFA-fe80::c6e:8fff:fef6:e7ff
    domain: efa_0-rdm
    version: 111.0
    type: FI_EP_RDM
    protocol: FI_PROTO_EFA
provider: efa
    fabric: EFA-fe80::c34:3eff:feb2:3c35
    domain: efa_1-rdm
    version: 111.0
    type: FI_EP_RDM
    protocol: FI_PROTO_EFA
provider: efa
    fabric: EFA-fe80::c0f:7bff:fe68:a775
    domain: efa_2-rdm
    version: 111.0
    type: FI_EP_RDM
    protocol: FI_PROTO_EFA
provider: efa
    fabric: EFA-fe80::ca7:b0ff:fea6:5e99
    domain: efa_3-rdm
    version: 111.0
    type: FI_EP_RDM
    protocol: FI_PROTO_EFA
"""


def inputs(**overrides):
    base = {
        "version": "1.41.0",
        "sha256": efa.PUBLISHED_SHA256["1.41.0"],
        "base_url": efa.DEFAULT_BASE_URL,
        "url": "",
        "bake": False,
        "kmod": True,
        "minimal": False,
        "mpi": ["openmpi4"],
        "extra_flags": [],
        "work_dir": "/var/cache/gpufabric/aws-efa",
        "profile": "aws/p5.48xlarge",
        "ld_library_path": CATALOG_LD_PATH,
        **DEBIAN12,
    }
    base.update(overrides)
    return base


def plan_of(**overrides):
    """The plan as the role makes it: its settings, the profile and LD_LIBRARY_PATH from the host's plan, the
    distribution from the facts."""
    settings = inputs(**overrides)
    facts = {key: settings.pop(key) for key in ("distribution", "distribution_version", "os_family", "architecture")}
    host_plan = {"profile": settings.pop("profile"), "env": {"LD_LIBRARY_PATH": settings.pop("ld_library_path")}}
    return efa.plan(settings, host_plan, facts)


def error_of(**overrides):
    """The one error of the plan."""
    (error,) = plan_of(**overrides)["errors"]
    return error


# --- Defaults resolve to what the README says -------------------------------------------------------


def test_default_version_and_checksum_are_the_ones_aws_published():
    assert DEFAULTS["aws_efa_version"] == "1.47.0"
    assert DEFAULTS["aws_efa_sha256"] == efa.PUBLISHED_SHA256["1.47.0"]
    assert DEFAULTS["aws_efa_sha256"] == "2df4201e046833c7dc8160907bee7f52b76ff80ed147376a2d0ed8a0dd66b2db"
    assert DEFAULTS["aws_efa_base_url"] == efa.DEFAULT_BASE_URL == "https://efa-installer.amazonaws.com"
    assert DEFAULTS["aws_efa_url"] == ""


def test_default_url_is_aws_download_location():
    plan = plan_of(version=DEFAULTS["aws_efa_version"], sha256=DEFAULTS["aws_efa_sha256"])
    assert plan["errors"] == plan["warnings"] == []
    assert plan["url"] == "https://efa-installer.amazonaws.com/aws-efa-installer-1.47.0.tar.gz"
    assert plan["tarball"] == "/var/cache/gpufabric/aws-efa/aws-efa-installer-1.47.0.tar.gz"
    assert plan["installer_dir"] == "/var/cache/gpufabric/aws-efa/1.47.0/aws-efa-installer"


def test_readme_names_the_default_version_and_checksum():
    readme = (REPO / "roles" / "aws_efa" / "README.md").read_text(encoding="utf-8")
    assert DEFAULTS["aws_efa_sha256"] in readme
    assert "1.47.0" in readme


def test_published_checksums_are_sha256_and_bundle_the_plugin():
    for version, digest in efa.PUBLISHED_SHA256.items():
        assert efa.SHA256_RE.match(digest), version
        assert efa.at_least(version, efa.PLUGIN_SINCE_DEFAULT), version


def test_no_default_profile_and_mpi_default_matches_the_catalog_path():
    # The profile comes from gpufabric_plan (the plan role), never from a default of the role.
    assert "aws_efa_profile" not in DEFAULTS
    assert DEFAULTS["aws_efa_mpi"] == ["openmpi4"]
    assert efa.CATALOG_DIRS[efa.OPENMPI4_DIR][0] == "openmpi4"
    mpi_spec = ARGSPEC["argument_specs"]["main"]["options"]["aws_efa_mpi"]
    assert tuple(mpi_spec["choices"]) == efa.MPI_CHOICES


def test_mirror_base_url_and_explicit_url():
    mirror = plan_of(base_url="https://mirror.example/efa/")
    assert mirror["url"] == "https://mirror.example/efa/aws-efa-installer-1.41.0.tar.gz"
    explicit = plan_of(url="file:///srv/efa/custom.tgz")
    assert explicit["url"] == "file:///srv/efa/custom.tgz"


# --- Flags --------------------------------------------------------------------------------------------


def test_live_flags_keep_the_module_and_the_installer_check():
    assert plan_of()["flags"] == ["-y", "--skip-limit-conf", "--mpi=openmpi4"]


def test_bake_flags_skip_the_device_check():
    assert plan_of(bake=True)["flags"] == ["-y", "--skip-limit-conf", "--no-verify", "--mpi=openmpi4"]


def test_container_bake_skips_the_kernel_module():
    flags = plan_of(bake=True, kmod=False)["flags"]
    assert flags == ["-y", "--skip-limit-conf", "--no-verify", "--skip-kmod", "--mpi=openmpi4"]


def test_minimal_drops_mpi_and_installs_no_user_space():
    plan = plan_of(minimal=True, mpi=["openmpi4", "openmpi5"])
    assert plan["flags"] == ["-y", "--skip-limit-conf", "--minimal"]
    assert plan["components"] == []


def test_empty_mpi_leaves_the_installer_default_and_extra_flags_come_last():
    plan = plan_of(mpi=[], extra_flags=["-d", "--enable-ngc"])
    assert plan["flags"] == ["-y", "--skip-limit-conf", "-d", "--enable-ngc"]
    assert plan["components"] == ["libfabric", "aws-ofi-nccl", "openmpi4", "openmpi5"]


def test_skip_plugin_in_extra_flags_drops_the_plugin_component():
    assert "aws-ofi-nccl" not in plan_of(extra_flags=["--skip-plugin"])["components"]


@pytest.mark.parametrize("flag", ["--minimal", "-k", "--no-verify", "--mpi=openmpi5", "-u", "--skip-limit-conf"])
def test_extra_flags_may_not_repeat_the_roles_flags(flag):
    error = error_of(extra_flags=[flag])
    assert error.startswith(f"aws_efa_extra_flags '{flag}' is managed by the role")
    assert "accepted: other efa_installer.sh options" in error


# --- Bad input: one sentence naming the value, the variable and what is accepted ---------------------


@pytest.mark.parametrize("version", ["latest", "1.41", "v1.41.0", ""])
def test_version_must_be_a_release(version):
    error = error_of(version=version)
    assert error.startswith(f"aws_efa_version '{version}' is not a release version; accepted: X.Y.Z")


def test_empty_checksum_names_where_to_get_it():
    error = error_of(version="1.99.0", sha256="")
    assert error.startswith("aws_efa_sha256 is empty; accepted: the SHA256 AWS publishes for aws-efa-installer-1.99.0")
    assert efa.VERIFY_DOC in error
    assert "https://efa-installer.amazonaws.com/aws-efa-installer-1.99.0.tar.gz.sig" in error
    assert efa.SIGNING_KEY_FINGERPRINT in error


def test_checksum_must_be_hex():
    assert error_of(sha256="xyz").startswith("aws_efa_sha256 'xyz' is not a SHA256")


def test_a_version_changed_without_its_checksum_is_caught_before_download():
    error = error_of(version="1.38.1")
    assert "is not the checksum AWS published for aws-efa-installer-1.38.1.tar.gz" in error
    assert efa.PUBLISHED_SHA256["1.38.1"] in error


def test_an_unpublished_version_with_its_checksum_is_accepted():
    assert plan_of(version="1.99.0", sha256=SHA)["errors"] == []


def test_unknown_mpi_flavour():
    error = error_of(mpi=["mpich"])
    assert error == "aws_efa_mpi 'mpich' is not an Open MPI flavour; accepted: openmpi4, openmpi5"


# --- Distribution and plugin support per installer version ------------------------------------------


@pytest.mark.parametrize(
    ("facts", "key"),
    [
        (DEBIAN12, "debian-12"),
        (DEBIAN13, "debian-13"),
        (UBUNTU2204, "ubuntu-22.04"),
        (UBUNTU2404, "ubuntu-24.04"),
        (AL2023, "amazon-2023"),
        ({"distribution": "Rocky", "distribution_version": "9.4"}, "rocky-9"),
        ({"distribution": "RedHat", "distribution_version": "9.4"}, "redhat-9"),
    ],
)
def test_distro_keys(facts, key):
    assert efa.distro_key(facts["distribution"], facts["distribution_version"]) == key


# Over the facts ansible-core gathers from each OS's real release files (tests/fixtures/os_release/): the Debian
# releases molecule/aws_efa no longer runs on (it runs the Ubuntu 22.04 identity image), and both Ubuntu releases.
@pytest.mark.parametrize(
    ("target", "distro"),
    [
        ("debian12", "debian-12"),
        ("debian13", "debian-13"),
        ("ubuntu2204", "ubuntu-22.04"),
        ("ubuntu2404", "ubuntu-24.04"),
    ],
)
def test_plan_over_recorded_facts(target, distro):
    settings = inputs(version="1.47.0", sha256=efa.PUBLISHED_SHA256["1.47.0"])
    for key in DEBIAN12:  # the distribution comes from the recorded facts only
        del settings[key]
    host_plan = {"profile": settings.pop("profile"), "env": {"LD_LIBRARY_PATH": settings.pop("ld_library_path")}}
    plan = efa.plan(settings, host_plan, recorded_facts(target))
    assert plan["errors"] == []
    assert plan["distro"] == distro
    assert plan["multiarch_plugin_dir"] == "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"


@pytest.mark.parametrize("facts", [DEBIAN12, UBUNTU2204, UBUNTU2404])
def test_default_version_supports_the_tested_and_ubuntu_distributions(facts):
    assert plan_of(**facts)["errors"] == []


def test_1_41_refuses_debian_13_and_names_the_minimum():
    error = error_of(**DEBIAN13)
    assert error == "aws_efa_version 1.41.0 does not support Debian 13; accepted: 1.46.0 or newer"
    assert plan_of(version="1.46.0", sha256=efa.PUBLISHED_SHA256["1.46.0"], **DEBIAN13)["errors"] == []


@pytest.mark.parametrize("profile", ["aws/p5.48xlarge", "aws/p6-b200.48xlarge"])
@pytest.mark.parametrize("facts", [DEBIAN12, DEBIAN13, UBUNTU2204, UBUNTU2404])
def test_default_version_runs_on_every_tested_distribution_and_instance(facts, profile):
    defaults = {"version": DEFAULTS["aws_efa_version"], "sha256": DEFAULTS["aws_efa_sha256"]}
    assert plan_of(**facts, **defaults, profile=profile)["errors"] == []


def test_debian_12_needs_1_36():
    error = error_of(version="1.35.0", sha256=SHA, minimal=True)
    assert error == "aws_efa_version 1.35.0 does not support Debian 12; accepted: 1.36.0 or newer"


def test_dropped_distributions_name_the_last_version():
    ubuntu2004 = {"distribution": "Ubuntu", "distribution_version": "20.04", "os_family": "Debian"}
    error = error_of(version="1.43.0", sha256=efa.PUBLISHED_SHA256["1.43.0"], **ubuntu2004)
    assert error == "aws_efa_version 1.43.0 does not support Ubuntu 20.04; accepted: older than 1.43.0"


def test_unknown_distribution_lists_the_supported_ones():
    error = error_of(distribution="Gentoo", distribution_version="2.17")
    assert error.startswith("Gentoo 2.17 is not supported by the EFA installer; accepted: Ubuntu 20.04")
    assert "Debian 13" in error


def test_plugin_needs_1_38_and_minimal_lifts_it():
    error = error_of(version="1.37.0", sha256=SHA)
    assert error.startswith("aws_efa_version 1.37.0 does not bundle aws-ofi-nccl on Debian 12")
    assert "accepted: 1.38.0 or newer, or aws_efa_minimal=true" in error
    assert plan_of(version="1.37.0", sha256=SHA, minimal=True)["errors"] == []


def test_plugin_on_arm_and_rhel_9():
    assert efa.plugin_since("ubuntu-22.04", "aarch64") == "1.40.0"
    assert efa.plugin_since("debian-12", "aarch64") is None
    assert efa.plugin_since("redhat-9", "x86_64") == "1.46.0"
    assert efa.plugin_since("ubuntu-24.04", "x86_64") == "1.38.0"


def test_p6_b200_needs_the_plugin_that_knows_it():
    error = error_of(profile="aws/p6-b200.48xlarge")
    assert error.startswith("aws_efa_version 1.41.0 is too old for p6-b200.48xlarge")
    assert "accepted: 1.42.0 or newer" in error
    newer = {"version": "1.42.0", "sha256": efa.PUBLISHED_SHA256["1.42.0"]}
    assert plan_of(profile="aws/p6-b200.48xlarge", **newer)["errors"] == []


def test_multiarch_directory_only_on_debian_family():
    assert plan_of()["multiarch_plugin_dir"] == "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
    arm = plan_of(**{**UBUNTU2204, "architecture": "aarch64"}, version="1.99.0", sha256=SHA)
    assert arm["multiarch_plugin_dir"] == "/opt/amazon/ofi-nccl/lib/aarch64-linux-gnu"
    assert plan_of(**AL2023)["multiarch_plugin_dir"] == ""


def test_every_bad_setting_has_its_own_message():
    errors = plan_of(version="latest", mpi=["mpich"], extra_flags=["-y", "--skip-kmod"])["errors"]
    assert [error.split(" ", 1)[0] for error in errors] == [
        "aws_efa_version",
        "aws_efa_mpi",
        "aws_efa_extra_flags",
        "aws_efa_extra_flags",
    ]
    assert set(plan_of(version="latest")) == {"errors", "warnings"}


# --- Idempotence: the version marker and the role's record ------------------------------------------


def test_marker_parsing():
    assert efa.installed_version(MARKER_1_22) == "1.22.0"
    assert efa.installed_version("") is None
    assert efa.installed_version("garbage\n") is None


def test_install_reasons():
    plan = plan_of()
    flags = plan["flags"]
    marker = MARKER_1_22.replace("1.22.0", "1.41.0")
    state = '{"version": "1.41.0", "flags": ' + str(flags).replace("'", '"') + "}"
    assert efa.install_decision(plan, "", "")["reason"].startswith("no EFA software installed")
    assert efa.install_decision(plan, MARKER_1_22, "") == {
        "installed": "1.22.0",
        "reason": "EFA installer 1.22.0 is installed; the pin is 1.41.0",
        "adopt": {"mode": "install", "known": False, "found": {}, "missing": [], "refused": ""},
        "hold": [],
        # Adopt mode's record, released before the installer runs (on apt hosts: the role's task asks for Debian).
        "release": ["gpufabric-aws-efa-adopted"],
    }
    assert efa.install_decision(plan, marker, state)["reason"] == ""
    # A host with the pin preinstalled (e.g. an AMI) and no record of the role is kept.
    assert efa.install_decision(plan, marker, "")["reason"] == ""
    assert efa.install_decision(plan_of(minimal=True), marker, state)["reason"].startswith(
        "installed with flags -y --skip-limit-conf --mpi=openmpi4; the role now runs"
    )
    assert efa.install_decision(plan, marker, "not json")["reason"] == ""


# --- Libraries where the catalog environment looks ----------------------------------------------------


def test_library_candidates_follow_the_catalog_path():
    assert plan_of()["library_candidates"] == [
        "/opt/amazon/ofi-nccl/lib/libnccl-net.so",
        "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
        "/opt/amazon/efa/lib/libfabric.so.1",
        "/opt/amazon/efa/lib/libfabric.so",
        "/opt/amazon/openmpi/lib/libmpi.so.40",
        "/opt/amazon/openmpi/lib/libmpi.so",
    ]


def test_libraries_all_present():
    found = [
        "/opt/amazon/ofi-nccl/lib/libnccl-net.so",
        "/opt/amazon/efa/lib/libfabric.so.1",
        "/opt/amazon/openmpi/lib/libmpi.so.40",
    ]
    assert efa.library_findings(CATALOG_LD_PATH, found, ["libfabric", "aws-ofi-nccl", "openmpi4"]) == []


def test_ubuntu_layout_without_links_is_an_error_with_the_socket_consequence():
    # Only lib/x86_64-linux-gnu holds the plugin: nothing in the directory the catalog names.
    found = ["/opt/amazon/efa/lib/libfabric.so.1", "/opt/amazon/openmpi/lib/libmpi.so.40"]
    findings = efa.library_findings(CATALOG_LD_PATH, found, ["libfabric", "aws-ofi-nccl", "openmpi4"])
    assert [f["severity"] for f in findings] == ["error"]
    assert findings[0]["message"].startswith("aws-ofi-nccl is not in /opt/amazon/ofi-nccl/lib")
    assert "Socket transport" in findings[0]["message"]


def test_missing_open_mpi_is_a_warning():
    found = ["/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "/opt/amazon/efa/lib/libfabric.so"]
    findings = efa.library_findings(CATALOG_LD_PATH, found, ["libfabric", "aws-ofi-nccl", "openmpi4"])
    assert [f["severity"] for f in findings] == ["warning"]
    assert "MPI-launched jobs" in findings[0]["message"]


def test_minimal_turns_missing_libraries_into_warnings():
    findings = efa.library_findings(CATALOG_LD_PATH, [], [])
    assert [f["severity"] for f in findings] == ["warning", "warning", "warning"]
    assert "aws_efa_minimal" in findings[0]["message"]


def test_directories_outside_the_installer_are_ignored():
    assert efa.library_findings("/usr/local/cuda/lib64:/opt/nccl/lib", [], ["libfabric"]) == []


# --- fi_info ------------------------------------------------------------------------------------------


def test_fi_info_counts_the_p4d_example_from_aws_docs():
    report = efa.fi_info_report(FI_INFO_P4D, 4, "aws/p4d.24xlarge")
    assert report["ok"]
    assert report["domains"] == ["efa_0-rdm", "efa_1-rdm", "efa_2-rdm", "efa_3-rdm"]


def test_fi_info_counts_distinct_rdm_domains_only():
    dgram = FI_INFO_P4D.replace("-rdm", "-dgrm").replace("FI_EP_RDM", "FI_EP_DGRAM")
    newer = "provider: efa\n    fabric: efa-direct\n    domain: rdmap16s27-rdm\n    type: FI_EP_RDM\n"
    assert efa.efa_domains(FI_INFO_P4D + dgram + newer + FI_INFO_P4D) == [
        "efa_0-rdm",
        "efa_1-rdm",
        "efa_2-rdm",
        "efa_3-rdm",
        "rdmap16s27-rdm",
    ]
    assert efa.efa_domains("provider: tcp\n    domain: eth0\n    type: FI_EP_RDM\n") == []


def test_fi_info_too_few_names_expected_and_found():
    blocks = FI_INFO_P4D.split("provider: ")[1:]
    two = "".join("provider: " + block for block in blocks[:2])
    report = efa.fi_info_report(two, 32, "aws/p5.48xlarge")
    assert not report["ok"]
    assert report["count"] == 2
    assert report["message"].startswith(
        "fi_info -p efa lists 2 EFA device(s) (efa_0-rdm, efa_1-rdm); aws/p5.48xlarge expects 32"
    )
    assert "only 2 of 32 EFA links" in report["message"]


def test_fi_info_none_names_the_socket_fallback():
    report = efa.fi_info_report("fi_getinfo: -61 (No data available)\n", 4, "aws/p4d.24xlarge")
    assert not report["ok"]
    assert report["message"].startswith("fi_info -p efa lists no EFA device; aws/p4d.24xlarge expects 4")
    assert "Socket transport" in report["message"]


# --- The molecule TEST DOUBLE stays a test double ---------------------------------------------------


def test_test_double_installer_is_marked_and_reproducible(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "build_installer", REPO / "molecule" / "aws_efa" / "build_installer.py"
    )
    builder = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(builder)
    assert "TEST DOUBLE" in builder.INSTALLER
    assert "# EFA installer version: ${EFA_INSTALLER_VERSION}" in builder.INSTALLER
    assert set(builder.RELEASES).isdisjoint(efa.PUBLISHED_SHA256)
    if not __import__("shutil").which("dpkg-deb"):
        pytest.skip("dpkg-deb not installed")
    tarball = builder.build(tmp_path, "1.99.0")
    recorded = (tmp_path / f"{tarball.name}.sha256").read_text(encoding="utf-8").split()[0]
    assert recorded == hashlib.sha256(tarball.read_bytes()).hexdigest()


# --- The role's filters -------------------------------------------------------------------------------------


def test_the_filters_take_the_plans_and_refuse_what_is_not_their_input():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.gpufabric.cluster.plugins.filter.aws_efa import FilterModule
    from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_catalog import load_catalog
    from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_plan import plan_host

    filters = FilterModule().filters()
    host_plan = plan_host({"gpufabric_profile": "aws/p4d.24xlarge"}, load_catalog())
    settings = {key: value for key, value in inputs().items() if key not in {"profile", "ld_library_path", *DEBIAN12}}
    plan = filters["aws_efa_plan"](settings, plan=host_plan, facts=DEBIAN12)
    assert plan == plan_of(profile="aws/p4d.24xlarge") and plan["ld_library_path"] == CATALOG_LD_PATH
    assert filters["aws_efa_install"](plan, marker=MARKER_1_22)["installed"] == "1.22.0"
    found = ["/opt/amazon/efa/lib/libfabric.so.1", "/opt/amazon/openmpi/lib/libmpi.so.40"]
    assert filters["aws_efa_libraries"](plan, found) == efa.library_findings(CATALOG_LD_PATH, found, plan["components"])
    assert filters["aws_efa_fi_info"](FI_INFO_P4D, host_plan) == efa.fi_info_report(FI_INFO_P4D, 4, "aws/p4d.24xlarge")
    refusals = [
        (
            lambda: filters["aws_efa_plan"]("plan"),
            "aws_efa_plan: its input is str 'plan'; accepted: aws_efa__settings, the role's variables",
        ),
        (
            lambda: filters["aws_efa_plan"]({}, plan="aws/p5"),
            "aws_efa_plan: plan= is str 'aws/p5'; accepted: gpufabric_plan, the host's plan",
        ),
        (lambda: filters["aws_efa_install"](plan_of(version="x")), "expects a plan without errors"),
        (lambda: filters["aws_efa_libraries"](plan, "/opt"), "expects found as a list of paths, got str"),
        (lambda: filters["aws_efa_fi_info"]("", {"profile": "unknown"}), "profile 'unknown' has no GPU NIC count"),
    ]
    for call, message in refusals:
        with pytest.raises(AnsibleFilterError, match=re.escape(message)):
            call()
