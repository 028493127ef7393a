# SPDX-License-Identifier: Apache-2.0
"""rdma_stack's per-OS logic that molecule cannot reach: RHEL names and dnf specs, each release's inbox table,
Ubuntu's linux-modules-extra, DOCA URLs and its Ubuntu specifics, the supply it hands the modules, bad input."""

from __future__ import annotations

from functools import partial

import pytest
from ansible.errors import AnsibleFilterError

from gpufabric.collection import _import_plugins, module_utils
from tests import conftest

rdma = module_utils("rdma_stack")
rdma_filter = _import_plugins("filter", "rdma_stack")
vendor_packages = module_utils("vendor_packages")

DEBIAN12 = {"os_family": "Debian", "distribution": "Debian", "distribution_version": "12.8", "architecture": "x86_64"}
UBUNTU = {"os_family": "Debian", "distribution": "Ubuntu", "distribution_version": "22.04", "architecture": "aarch64"}
RHEL = {"os_family": "RedHat", "distribution": "RedHat", "distribution_version": "9.4", "architecture": "x86_64"}
INBOX = {"rdma-core": "44.0-2", "ibverbs-utils": "44.0-2", "libucx0": "1.13.1-1", "ucx-utils": "1.13.1-1"}
DOCA = {
    "flavor": "doca",
    "fabric": "infiniband",
    "doca_profile": "doca-ofed",
    "doca_version": "2.9.1-1",
    "doca_release": "2.9.1",
    "doca_base_url": "https://linux.mellanox.com/public/repo/doca",
    "doca_key_url": "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub",
    "doca_hold": ["doca-ofed-userspace", "doca-ofed"],
    "doca_key_fingerprints": ["0123 4567 89AB CDEF 0123 4567 89AB CDEF 0123 4567"],
}


def test_inbox_on_debian_pins_with_apt_syntax():
    plan = rdma.plan({"flavor": "inbox", "fabric": "infiniband", "inbox_packages": INBOX}, None, DEBIAN12)
    assert plan["errors"] == []
    assert plan["manager"] == "apt"
    assert [p["spec"] for p in plan["packages"]] == [
        "rdma-core=44.0-2",
        "ibverbs-utils=44.0-2",
        "libucx0=1.13.1-1",
        "ucx-utils=1.13.1-1",
    ]
    assert plan["holds"] == ["rdma-core", "ibverbs-utils", "libucx0", "ucx-utils"]
    assert plan["kernel_modules"] == ["ib_core", "ib_uverbs", "ib_umad", "rdma_ucm", "mlx5_ib"]
    assert plan["repo"] is None


def test_inbox_on_rhel_maps_names_and_uses_dnf_syntax():
    plan = rdma.plan({"flavor": "inbox", "fabric": "efa", "inbox_packages": INBOX}, None, RHEL)
    assert plan["errors"] == []
    assert plan["manager"] == "dnf"
    assert [p["spec"] for p in plan["packages"]] == [
        "rdma-core-44.0-2",
        "libibverbs-utils-44.0-2",
        "ucx-1.13.1-1",
    ]
    assert plan["kernel_modules"] == ["ib_core", "ib_uverbs", "efa"]


def test_rhel_name_collision_with_different_versions_is_refused():
    plan = rdma.plan(
        {"flavor": "inbox", "fabric": "none", "inbox_packages": {"libucx0": "1", "ucx-utils": "2"}}, None, RHEL
    )
    assert len(plan["errors"]) == 1 and "maps to ucx" in plan["errors"][0]


@pytest.mark.parametrize(
    ("facts", "url"),
    [
        (UBUNTU, "https://linux.mellanox.com/public/repo/doca/2.9.1/ubuntu22.04/arm64-sbsa/"),
        (RHEL, "https://linux.mellanox.com/public/repo/doca/2.9.1/rhel9.4/x86_64/"),
        (DEBIAN12, "https://linux.mellanox.com/public/repo/doca/2.9.1/debian12/x86_64/"),
    ],
)
def test_doca_repository_url_per_os(facts, url):
    plan = rdma.plan(DOCA, None, facts)
    assert plan["errors"] == []
    assert plan["repo"]["url"] == url
    assert plan["repo"]["suites"] == "./" and plan["repo"]["components"] == []


def test_doca_keyring_path_follows_the_key_format_and_family():
    assert rdma.plan(DOCA, None, UBUNTU)["repo"]["keyring"] == "/etc/apt/keyrings/gpufabric-doca.asc"
    local = rdma.plan({**DOCA, "doca_key_src": "/tmp/repo/key.gpg"}, None, UBUNTU)["repo"]
    assert local["keyring"] == "/etc/apt/keyrings/gpufabric-doca.gpg" and local["key_src"] == "/tmp/repo/key.gpg"
    assert rdma.plan(DOCA, None, RHEL)["repo"]["keyring"] == "/etc/pki/rpm-gpg/gpufabric-doca.asc"


def test_doca_pins_the_profile_and_holds_it_once():
    plan = rdma.plan(DOCA, None, RHEL)
    assert [p["spec"] for p in plan["packages"]] == ["doca-ofed-2.9.1-1"]
    assert plan["holds"] == ["doca-ofed", "doca-ofed-userspace"]
    debian = rdma.plan(DOCA, None, DEBIAN12)
    assert [p["spec"] for p in debian["packages"]] == ["doca-ofed=2.9.1-1"]
    # What vendor_packages is given: the pin, and the held package it brings along, from the DOCA repository.
    assert debian["supply"][0]["packages"] == [
        {"name": "doca-ofed", "version": "2.9.1-1", "hold": True, "repository": "gpufabric-doca"},
        {"name": "doca-ofed-userspace", "version": "", "hold": True, "repository": "gpufabric-doca"},
    ]


def test_explicit_repo_url_wins():
    plan = rdma.plan({**DOCA, "doca_repo_url": "file:/srv/aptrepo", "doca_suite": "stable"}, None, DEBIAN12)
    assert plan["repo"]["url"] == "file:/srv/aptrepo" and plan["repo"]["suites"] == "stable"


@pytest.mark.parametrize(
    ("facts", "settings", "message"),
    [
        (DEBIAN12, {**DOCA, "flavor": "mofed"}, "rdma_stack_flavor 'mofed' is not accepted; accepted: inbox, doca"),
        (DEBIAN12, {**DOCA, "fabric": "slingshot"}, "rdma_stack_fabric 'slingshot' is not accepted"),
        (DEBIAN12, {**DOCA, "doca_version": ""}, "rdma_stack_doca_version is empty"),
        (DEBIAN12, {**DOCA, "doca_key_url": "http://example.invalid/key"}, "accepted: an https:// URL"),
        (DEBIAN12, {**DOCA, "doca_key_url": ""}, "both empty"),
        (DEBIAN12, {**DOCA, "doca_key_fingerprints": []}, "rdma_stack_doca_key_fingerprints is []; accepted"),
        (DEBIAN12, {**DOCA, "doca_key_fingerprints": ["E6D6A281"]}, "fingerprint 'E6D6A281' is not accepted"),
        ({**DEBIAN12, "architecture": "ppc64le"}, DOCA, "architecture 'ppc64le' has no DOCA repository"),
        ({**DEBIAN12, "os_family": "Suse"}, DOCA, "os_family 'Suse' is not supported"),
        (DEBIAN12, {"flavor": "inbox", "fabric": "roce", "inbox_packages": {"rdma-core": None}}, "exact version"),
        (
            RHEL,
            {"flavor": "inbox", "fabric": "roce", "inbox_packages": {}},
            "rdma_stack_inbox_packages is empty and RedHat 9.4 (rhel9) has no default table of inbox versions; "
            "accepted: rdma_stack_inbox_packages set to package: exact version, or a release with a default table: "
            "debian12, debian13, ubuntu2204, ubuntu2404",
        ),
        (
            {**UBUNTU, "distribution_version": "20.04"},
            {"flavor": "inbox", "fabric": "roce", "inbox_packages": {}},
            "Ubuntu 20.04 (ubuntu2004) has no default table",
        ),
    ],
)
def test_bad_input_names_the_value(facts, settings, message):
    errors = rdma.plan(settings, None, facts)["errors"]
    assert any(message in error for error in errors), errors


def test_the_filter_takes_the_settings_piped_and_the_facts_by_keyword():
    settings = {"flavor": "inbox", "fabric": "roce", "inbox_packages": INBOX}
    assert rdma_filter.FilterModule().filters()["rdma_stack_plan"](settings, facts=DEBIAN12) == rdma.plan(
        settings, None, DEBIAN12
    )
    with pytest.raises(
        AnsibleFilterError, match=r"rdma_stack_plan: facts= is NoneType None; accepted: ansible_facts \(a dictionary\)"
    ):
        rdma_filter.FilterModule().filters()["rdma_stack_plan"](settings)


def test_kernel_modules_override_and_fabrics_without_rdma():
    base = {"flavor": "inbox", "inbox_packages": INBOX}
    assert rdma.plan({**base, "fabric": "tcpxo"}, None, DEBIAN12)["kernel_modules"] == []
    assert rdma.plan({**base, "fabric": "roce", "kernel_modules": ["mlx5_ib"]}, None, DEBIAN12)["kernel_modules"] == [
        "mlx5_ib"
    ]


def test_pending_compares_installed_versions():
    packages = [{"name": "rdma-core", "version": "44.0-2"}, {"name": "perftest", "version": "4.5+0.17-1"}]
    installed = {"rdma-core": [{"version": "44.0-2"}], "perftest": [{"version": "4.5+0.16-1"}]}
    assert vendor_packages.pending(packages, installed) == ["perftest"]
    rpm = {"rdma-core": [{"version": "44.0", "release": "2"}]}
    assert vendor_packages.pending(packages[:1], rpm) == []
    plan = rdma.plan(
        {"flavor": "inbox", "fabric": "none", "inbox_packages": INBOX}, None, {**DEBIAN12, "packages": installed}
    )
    assert plan["pending"] == ["ibverbs-utils", "libucx0", "ucx-utils"]


# The recorded facts of each OS, with a running kernel (tests/conftest.py).
recorded_facts = partial(conftest.recorded_facts, kernel="6.8.0-1015-gcp")


@pytest.mark.parametrize(
    ("target", "rdma_core", "perftest", "ucx", "libraries"),
    [
        ("debian12", "44.0-2", "4.5+0.17-1", "1.13.1-1", False),
        ("debian13", "56.1-1", "25.01.0+0.80-1", "1.18.1+ds-2+b1", False),
        # Ubuntu: any revision of the release's upstream, so that the -updates pocket's rebuild is taken and an
        # installed one never downgraded; the rdma-core libraries are pinned with it.
        ("ubuntu2204", "39.0-*", "4.4+0.37-*", "1.12.1~rc2-*", True),
        ("ubuntu2404", "50.0-*", "24.01.0+0.38-*", "1.16.0+ds-*", True),
    ],
)
def test_an_empty_inbox_table_means_the_release_s_own(target, rdma_core, perftest, ucx, libraries):
    plan = rdma.plan({"flavor": "inbox", "fabric": "infiniband", "inbox_packages": {}}, None, recorded_facts(target))
    assert plan["errors"] == []
    libs = dict.fromkeys(("ibverbs-providers", "libibverbs1", "librdmacm1"), rdma_core) if libraries else {}
    assert {p["name"]: p["version"] for p in plan["packages"]} == {
        "rdma-core": rdma_core,
        "ibverbs-utils": rdma_core,
        "infiniband-diags": rdma_core,
        **libs,
        "perftest": perftest,
        "libucx0": ucx,
        "ucx-utils": ucx,
    }
    # The distribution's own archive: no repository, no key.
    step = plan["supply"][0]
    assert step["keys"] == [] and step["repositories"] == []
    assert {p["repository"] for p in step["packages"]} == {""}


@pytest.mark.parametrize("target", ["rhel9", "rocky9"])
def test_rhel_has_no_default_table_and_says_so(target):
    facts = recorded_facts(target)
    errors = rdma.plan({"flavor": "inbox", "fabric": "efa", "inbox_packages": {}}, None, facts)["errors"]
    assert errors == [
        f"rdma_stack_inbox_packages is empty and {facts['distribution']} {facts['distribution_version']} (rhel9) has "
        "no default table of inbox versions; accepted: rdma_stack_inbox_packages set to package: exact version, or "
        "a release with a default table: debian12, debian13, ubuntu2204, ubuntu2404"
    ]
    # The operator's table still works there, with RHEL's names.
    plan = rdma.plan({"flavor": "inbox", "fabric": "efa", "inbox_packages": INBOX}, None, facts)
    assert plan["errors"] == [] and [p["spec"] for p in plan["packages"]][:2] == [
        "rdma-core-44.0-2",
        "libibverbs-utils-44.0-2",
    ]


def test_the_operator_s_table_replaces_the_release_s_whole():
    plan = rdma.plan(
        {"flavor": "inbox", "fabric": "none", "inbox_packages": {"rdma-core": "50.0-2ubuntu0.2"}},
        None,
        recorded_facts("ubuntu2404"),
    )
    assert [(p["name"], p["version"]) for p in plan["packages"]] == [("rdma-core", "50.0-2ubuntu0.2")]


@pytest.mark.parametrize("target", ["ubuntu2204", "ubuntu2404"])
def test_ubuntu_installs_the_running_kernel_s_modules_extra(target):
    plan = rdma.plan({"flavor": "inbox", "fabric": "roce", "inbox_packages": {}}, None, recorded_facts(target))
    extra = plan["supply"][0]["packages"][-1]
    # Named after the kernel, so no version; never held, so kernel updates are not blocked.
    assert extra == {"name": "linux-modules-extra-6.8.0-1015-gcp", "version": "", "hold": False, "repository": ""}
    assert "linux-modules-extra-6.8.0-1015-gcp" not in plan["holds"]
    assert "linux-modules-extra-6.8.0-1015-gcp" in plan["pending"]


@pytest.mark.parametrize(
    ("target", "settings"),
    [
        ("debian12", {"fabric": "infiniband"}),  # Debian's kernels carry the modules themselves
        ("ubuntu2204", {"fabric": "tcpxo"}),  # no RDMA modules needed
        ("ubuntu2204", {"fabric": "none"}),
    ],
)
def test_no_modules_extra_where_it_is_not_needed(target, settings):
    plan = rdma.plan({"flavor": "inbox", "inbox_packages": {}, **settings}, None, recorded_facts(target))
    assert not [p for p in plan["supply"][0]["packages"] if p["name"].startswith("linux-modules-extra")]


def test_bake_mode_installs_modules_extra_for_every_installed_kernel_image():
    installed = {
        "linux-image-6.8.0-1015-gcp": [{"version": "6.8.0-1015.16"}],
        "linux-image-unsigned-6.8.0-1020-gcp": [{"version": "6.8.0-1020.22"}],
        "linux-image-gcp": [{"version": "6.8.0.1015.16"}],  # the meta package names no kernel
    }
    facts = recorded_facts("ubuntu2404", packages=installed, kernel="6.1.0-builder")
    plan = rdma.plan({"flavor": "inbox", "fabric": "infiniband", "inbox_packages": {}, "bake": True}, None, facts)
    assert [p["name"] for p in plan["supply"][0]["packages"] if not p["hold"]] == [
        "linux-modules-extra-6.8.0-1015-gcp",
        "linux-modules-extra-6.8.0-1020-gcp",
    ]
    bare = rdma.plan(
        {"flavor": "inbox", "fabric": "infiniband", "inbox_packages": {}, "bake": True},
        None,
        recorded_facts("ubuntu2404", packages={}),
    )
    assert [p for p in bare["supply"][0]["packages"] if not p["hold"]] == []
    assert bare["errors"] == [] and "no installed linux-image-<release> package found" in bare["warnings"][0]


UBUNTU_DOCA = {**DOCA, "doca_hold": ["doca-ofed-userspace"]}


@pytest.mark.parametrize(
    ("target", "directory"), [("ubuntu2204", "ubuntu22.04/x86_64"), ("ubuntu2404", "ubuntu24.04/x86_64")]
)
def test_doca_on_ubuntu_supply_openmpi_and_dkms_pinned_away(target, directory):
    plan = rdma.plan(UBUNTU_DOCA, None, recorded_facts(target))
    assert plan["errors"] == []
    url = f"https://linux.mellanox.com/public/repo/doca/2.9.1/{directory}/"
    assert plan["supply"] == [
        {
            "keys": [
                {
                    "repository": "gpufabric-doca",
                    "url": "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub",
                    "src": "",
                    "dest": "/etc/apt/keyrings/gpufabric-doca.asc",
                    "fingerprints": DOCA["doca_key_fingerprints"],
                    "fingerprints_from": "rdma_stack_doca_key_fingerprints",
                    "checksum": "",
                }
            ],
            "repositories": [
                {
                    "name": "gpufabric-doca",
                    "uris": [url],
                    "suites": ["./"],
                    "components": [],
                    "architectures": [],
                    "signed_by": "/etc/apt/keyrings/gpufabric-doca.asc",
                }
            ],
            "packages": [
                {"name": "doca-ofed", "version": "2.9.1-1", "hold": True, "repository": "gpufabric-doca"},
                {"name": "doca-ofed-userspace", "version": "", "hold": True, "repository": "gpufabric-doca"},
                {"name": "openmpi", "version": "", "hold": True, "repository": "gpufabric-doca"},
            ],
            "preferences": "",
            "pin_priority": 1001,
            "release": ["gpufabric-rdma-stack-adopted"],
        }
    ]
    assert plan["holds"] == ["doca-ofed", "doca-ofed-userspace", "openmpi"]
    assert plan["apt_pins"] == [
        {
            "path": "/etc/apt/preferences.d/gpufabric-doca-dkms.pref",
            "content": "# Managed by gpufabric (role gpufabric.cluster.rdma_stack): local edits are overwritten.\n"
            "# DOCA's repository ships its own dkms; the distribution's is kept.\n"
            "Package: dkms\nPin: origin linux.mellanox.com\nPin-Priority: -1\n",
        }
    ]
    # DOCA builds its own kernel modules: no linux-modules-extra.
    assert not [p for p in plan["supply"][0]["packages"] if p["name"].startswith("linux-modules-extra")]


def test_doca_on_ubuntu_openmpi_pinned_and_a_local_mirror_needs_its_dkms_pin():
    facts = recorded_facts("ubuntu2204")
    pinned = rdma.plan({**UBUNTU_DOCA, "doca_openmpi_version": "4.1.7a1-1", "doca_hold": ["openmpi"]}, None, facts)
    assert [(p["name"], p["version"]) for p in pinned["supply"][0]["packages"]] == [
        ("doca-ofed", "2.9.1-1"),
        ("openmpi", "4.1.7a1-1"),
    ]
    assert pinned["holds"] == ["doca-ofed", "openmpi"]
    local = {**UBUNTU_DOCA, "doca_repo_url": "file:/srv/doca"}
    assert rdma.plan(local, None, facts)["errors"] == [
        "rdma_stack_doca_dkms_pin is empty and the DOCA repository 'file:/srv/doca' has no host to pin DOCA's dkms "
        "away by; accepted: an APT preferences Pin selecting the DOCA repository, e.g. 'release l=DOCA-HOST*' (the "
        "label of DOCA's local-repo package) or 'origin linux.mellanox.com'"
    ]
    chosen = rdma.plan({**local, "doca_dkms_pin": "release o=TEST DOUBLE"}, None, facts)
    assert chosen["errors"] == [] and "Pin: release o=TEST DOUBLE\n" in chosen["apt_pins"][0]["content"]


def test_doca_on_debian_writes_no_pins_and_names_no_openmpi():
    plan = rdma.plan(DOCA, None, recorded_facts("debian12"))
    assert plan["apt_pins"] == []
    assert "openmpi" not in [p["name"] for p in plan["supply"][0]["packages"]]


@pytest.mark.parametrize("target", ["debian12", "debian13", "ubuntu2204", "ubuntu2404"])
@pytest.mark.parametrize("settings", [{"flavor": "inbox", "inbox_packages": {}}, UBUNTU_DOCA])
def test_vendor_packages_accepts_every_step_unchanged(target, settings):
    plan = rdma.plan({**settings, "fabric": "infiniband"}, None, recorded_facts(target))
    assert plan["errors"] == []
    for step in plan["supply"]:
        request = vendor_packages.parse_request(
            {key: step[key] for key in ("repositories", "packages", "preferences", "pin_priority")}
        )
        assert [p.name for p in request.packages] == [p["name"] for p in step["packages"]]
