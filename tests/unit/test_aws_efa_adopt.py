# SPDX-License-Identifier: Apache-2.0
"""aws_efa's adopt mode over the EFA installer's record as AWS's installer writes it on Ubuntu: an AMI's EFA at
the floor or newer is kept and held at the versions dpkg has; an older one, a recorded package gone, a host
without apt or a bad mode is refused with one message; a host without EFA is installed as in install mode.
`gpufabric plan --probe` makes the same decision from the probed record (supply.host_facts)."""

from __future__ import annotations

import pytest

from gpufabric import supply
from gpufabric.collection import module_utils
from tests.conftest import package_facts
from tests.unit.test_aws_efa_logic import AL2023, UBUNTU2204, plan_of

efa = module_utils("aws_efa")
hw_facts = module_utils("hw_facts")

# The record's layout on Ubuntu (aws/libfabric issue #3, installer 1.5.1): each package as name_version_arch. The
# versions here are a TEST-DOUBLE's; which ones a Deep Learning AMI carries is read from the host.
MARKER = (
    "# EFA installer version: 1.43.2\n# Debug packages installed: no\n# Packages installed:\n"
    "efa_2.17.1-1_amd64 efa-config_1.18-1_all efa-profile_1.7-1_all ibacm_58.0-1_amd64 "
    "libfabric-aws-bin_2.1.0amzn4.0_amd64 libfabric1-aws_2.1.0amzn4.0_amd64 libnccl-ofi_1.16.0-1_amd64 "
    "openmpi40-aws_4.1.7-2_amd64\n"
)
RECORDED = {
    "efa": "2.17.1-1",
    "efa-config": "1.18-1",
    "efa-profile": "1.7-1",
    "ibacm": "58.0-1",
    "libfabric-aws-bin": "2.1.0amzn4.0",
    "libfabric1-aws": "2.1.0amzn4.0",
    "libnccl-ofi": "1.16.0-1",
    "openmpi40-aws": "4.1.7-2",
}


def adopt_plan(**overrides):
    return plan_of(mode="adopt", version="1.43.2", sha256=efa.PUBLISHED_SHA256["1.43.2"], **UBUNTU2204, **overrides)


def test_the_record_lists_name_version_arch_and_ignores_rpm_names():
    assert efa.recorded_packages(MARKER) == RECORDED
    assert efa.recorded_packages("# Packages installed:\nefa-config-1.13-1.el8.noarch\n") == {}
    assert efa.recorded_packages("") == {}


def test_an_ami_at_the_floor_is_kept_and_its_packages_held_at_dpkgs_versions():
    live = RECORDED | {"libnccl-ofi": "1.16.2-1", "unrelated": "1"}  # moved since the installer ran
    decision = efa.install_decision(adopt_plan(), MARKER, "", "adopt", package_facts(live))
    assert decision["reason"] == ""
    assert decision["adopt"] == {
        "mode": "adopt",
        "known": True,
        "found": RECORDED | {"libnccl-ofi": "1.16.2-1"},
        "missing": [],
        "refused": "",
    }
    (step,) = decision["hold"]
    assert step["preferences"] == efa.PREFERENCES
    assert {pin["name"]: (pin["version"], pin["hold"]) for pin in step["packages"]} == {
        name: (version, True) for name, version in decision["adopt"]["found"].items()
    }


def test_a_newer_installer_than_the_floor_is_kept():
    marker = MARKER.replace("1.43.2", "1.47.0")
    assert efa.install_decision(adopt_plan(), marker, "", "adopt", package_facts(RECORDED))["reason"] == ""


def test_an_older_installer_is_refused_naming_version_floor_and_the_way_out():
    marker = MARKER.replace("1.43.2", "1.38.0")
    decision = efa.install_decision(adopt_plan(), marker, "", "adopt", package_facts(RECORDED))
    assert decision["hold"] == [] and decision["reason"] == ""
    assert decision["adopt"]["refused"] == (
        "aws_efa_provision 'adopt': the image's EFA installer 1.38.0 (/opt/amazon/efa_installed_packages) is older "
        "than aws_efa_version 1.43.2, the floor in adopt mode; accepted: 1.43.2 or newer; lower aws_efa_version to "
        "keep the image's, or aws_efa_provision 'install' replaces it"
    )


def test_a_version_that_is_not_a_release_is_refused_as_such():
    marker = MARKER.replace("1.43.2", "1.43.2rc1")
    refused = efa.install_decision(adopt_plan(), marker, "", "adopt", package_facts(RECORDED))["adopt"]["refused"]
    assert "records version '1.43.2rc1' (/opt/amazon/efa_installed_packages), not a release version X.Y.Z" in refused


def test_a_recorded_package_removed_by_hand_is_refused():
    live = {name: version for name, version in RECORDED.items() if name != "libnccl-ofi"}
    refused = efa.install_decision(adopt_plan(), MARKER, "", "adopt", package_facts(live))["adopt"]["refused"]
    assert "recorded libnccl-ofi, which dpkg does not have" in refused
    assert refused.endswith("aws_efa_provision 'install' runs the installer again")


def test_nothing_installed_runs_the_installer_as_install_mode_would():
    decision = efa.install_decision(adopt_plan(), "", "", "adopt", package_facts({}))
    assert decision["reason"].startswith("no EFA software installed")
    assert decision["adopt"]["missing"] == ["EFA installer 1.43.2"] and decision["hold"] == []


def test_install_mode_replaces_an_ami_at_another_version():
    plan = plan_of(version="1.43.2", sha256=efa.PUBLISHED_SHA256["1.43.2"], **UBUNTU2204)
    marker = MARKER.replace("1.43.2", "1.47.0")
    decision = efa.install_decision(plan, marker, "", "install", package_facts(RECORDED))
    assert decision["reason"] == "EFA installer 1.47.0 is installed; the pin is 1.43.2" and decision["hold"] == []
    # The installer removes what it recorded, which dpkg refuses while adopt mode (an earlier run) holds it.
    assert decision["release"] == [efa.PREFERENCES]
    assert efa.install_decision(plan, marker.replace("1.47.0", "1.43.2"), "", "install")["release"] == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mode": "keep"}, "aws_efa_provision 'keep' is not accepted; accepted: install, adopt"),
        (
            {"mode": "adopt", **AL2023},
            "aws_efa_provision 'adopt' holds the image's EFA packages with apt, and Amazon has none; accepted "
            "there: aws_efa_provision 'install'",
        ),
    ],
)
def test_a_mode_the_host_cannot_take_is_an_input_error(overrides, message):
    assert message in plan_of(**overrides)["errors"]


def test_plan_probe_makes_the_roles_decision_from_the_probed_record():
    """supply.host_facts puts the probe's record where aws_efa's plan reads it; without it the plan does not know."""
    probed = {"host": {"os": {"id": "ubuntu", "version_id": "22.04"}, "packages": RECORDED, "efa_installer": MARKER}}
    facts, _name, _where = supply.host_facts({}, probed)
    settings = {"mode": "adopt", "version": "1.43.2", "sha256": efa.PUBLISHED_SHA256["1.43.2"], "mpi": ["openmpi4"]}
    host_plan = {"profile": "aws/p5.48xlarge", "env": {"LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib"}}
    assert efa.plan(settings, host_plan, facts)["adopt"]["found"] == RECORDED
    # The image's installer is kept: the plan shows no tarball to fetch.
    assert efa.plan(settings, host_plan, facts)["artifacts"] == []
    del facts[efa.PROBED_MARKER]
    unknown = efa.plan(settings, host_plan, facts)
    assert unknown["adopt"]["known"] is False
    # Not probed: the tarball the installer tasks would download if the image has none, by its published SHA256.
    assert unknown["artifacts"] == [
        {
            "kind": "tarball",
            "name": "aws-efa-installer 1.43.2",
            "source": "https://efa-installer.amazonaws.com/aws-efa-installer-1.43.2.tar.gz",
            "checksum": "sha256:" + efa.PUBLISHED_SHA256["1.43.2"],
        }
    ]


def test_the_probe_reads_the_record_and_every_recorded_package_by_its_prefix():
    assert hw_facts.EFA_INSTALLER_MARKER == efa.MARKER_FILE
    assert all(name.startswith(hw_facts.STACK_PACKAGE_PREFIXES) for name in RECORDED)
