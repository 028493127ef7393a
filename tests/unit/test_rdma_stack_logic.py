# SPDX-License-Identifier: Apache-2.0
"""rdma_stack's per-OS logic that molecule cannot reach: RHEL names and dnf specs, DOCA URLs, bad input."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from gpufabric.collection import _import_plugins, module_utils

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
    ubuntu = rdma.plan(DOCA, None, UBUNTU)
    assert [p["spec"] for p in ubuntu["packages"]] == ["doca-ofed=2.9.1-1"]
    # What vendor_packages is given: the pin, and the held package it brings along.
    assert ubuntu["install"] == [
        {"name": "doca-ofed", "version": "2.9.1-1", "hold": True},
        {"name": "doca-ofed-userspace", "hold": True},
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
        (DEBIAN12, {"flavor": "inbox", "fabric": "roce", "inbox_packages": {}}, "rdma_stack_inbox_packages is empty"),
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
