# SPDX-License-Identifier: Apache-2.0
"""Host variables of the wrong type, and IP ranges that cannot work, through `plan` and `k8s manifests`.

Each bad host var is one error naming the host, the variable, its value and what is accepted (exit 1, nothing
written); the SR-IOV variables go through the sriov role's own check (module_utils/sriov.py layout_vars). A
string for sriov_physical_functions is ONE physical function. IP ranges too small for the VFs they must
address, or overlapping, are warnings (stderr and the README), not errors; an invalid CIDR is an error.
Plan never connects without --probe, so the hosts need no address.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fuzz.harness import Case, Result, run

SRIOV = "baremetal/hgx-h100-ib-ndr-sriov"
INVENTORY = "inv.yml"


def inventory(**variables: Any) -> Callable[[Path], None]:
    """An inventory of two SR-IOV hosts; `variables` go to gpu-1 only (gpu-0 is always good)."""

    def setup(tmp: Path) -> None:
        hosts = {
            "gpu-0": {"ansible_connection": "local", "gpufabric_profile": SRIOV},
            "gpu-1": {"ansible_connection": "local", "gpufabric_profile": SRIOV, **variables},
        }
        (tmp / INVENTORY).write_text(yaml.safe_dump({"all": {"hosts": hosts}}), encoding="utf-8")

    return setup


def per_rail_catalog(tmp: Path) -> None:
    """The SR-IOV hosts with their PF netdevs named (gpufabric_nic_names: the catalog names none), so k8s manifests
    splits the range into 8 rails."""
    rails = {"gpufabric_nic_names": {"gpu": [f"ibp{n}s0" for n in range(8)]}}
    hosts = {
        "gpu-0": {"ansible_connection": "local", "gpufabric_profile": SRIOV, **rails},
        "gpu-1": {"ansible_connection": "local", "gpufabric_profile": SRIOV, **rails},
    }
    (tmp / INVENTORY).write_text(yaml.safe_dump({"all": {"hosts": hosts}}), encoding="utf-8")


# (case id, host vars of gpu-1, text the error must carry after "host gpu-1: host var ")
BAD_VARS: list[tuple[str, dict[str, Any], str]] = [
    ("profile-list", {"gpufabric_profile": [SRIOV]}, f"gpufabric_profile ['{SRIOV}'] is a list, not text"),
    ("profile-mapping", {"gpufabric_profile": {"name": SRIOV}}, "gpufabric_profile {'name': "),
    ("tier-list", {"gpufabric_tier": ["best"]}, "gpufabric_tier ['best'] is a list, not text; accepted: one of best"),
    ("tier-number", {"gpufabric_tier": 1}, "gpufabric_tier 1 is a number, not text"),
    ("cloud-list", {"gpufabric_cloud": ["aws"]}, "gpufabric_cloud ['aws'] is a list"),
    ("instance-type-mapping", {"gpufabric_instance_type": {"a": 1}}, "gpufabric_instance_type {'a': 1} is a mapping"),
    ("num-vfs-text", {"sriov_num_vfs": "abc"}, "sriov_num_vfs 'abc' is not a VF count; accepted: an integer >= 0"),
    ("num-vfs-negative", {"sriov_num_vfs": -4}, "sriov_num_vfs -4 is not a VF count"),
    ("num-vfs-float", {"sriov_num_vfs": 2.5}, "sriov_num_vfs 2.5 is not a VF count"),
    ("num-vfs-bool", {"sriov_num_vfs": True}, "sriov_num_vfs True is not a VF count"),
    ("pfs-int", {"sriov_physical_functions": 3}, "sriov_physical_functions 3 is not a list of names; accepted:"),
    ("pfs-mapping", {"sriov_physical_functions": {"ibp23s0": 1}}, "sriov_physical_functions {'ibp23s0': 1} is not"),
    ("pfs-list-of-ints", {"sriov_physical_functions": [1, 2]}, "sriov_physical_functions [1, 2] is not a list"),
    ("scheme-unknown", {"sriov_address_scheme": "random"}, "sriov_address_scheme 'random' is not a scheme; accepted"),
    ("scheme-list", {"sriov_address_scheme": ["derived"]}, "sriov_address_scheme ['derived'] is not a scheme"),
]


def _one_pf(result: Result) -> None:
    layout = json.loads(result.stdout)["hosts"]["gpu-1"]["sriov"]
    assert layout["physical_functions"] == ["ibp23s0"], layout
    assert (layout["nics"], layout["vfs"]) == (1, 8), layout


def _warns(*texts: str) -> Callable[[Result], None]:
    """The warning is on stderr and in the README; the files are written (a warning is not an error)."""

    def expect(result: Result) -> None:
        warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
        readme = (result.tmp / "out" / "README.md").read_text(encoding="utf-8")
        for text in texts:
            assert any(text in line for line in warnings), result.stderr
            assert text in readme
        assert not [line for line in result.stderr.splitlines() if line.startswith("error:")], result.stderr

    return expect


def _no_range_warning(result: Result) -> None:
    assert "addresses for" not in result.stderr and "overlaps" not in result.stderr, result.stderr


MANIFESTS = ("k8s", "manifests", "-i", INVENTORY, "-o", "out")
STORAGE = ("--storage-interface", "eth1")

CASES = [
    *(
        Case(f"plan-{name}", ("plan", "-i", INVENTORY), names=f"host gpu-1: host var {text}", setup=inventory(**hv))
        for name, hv, text in BAD_VARS
    ),
    *(
        Case(
            f"k8s-{name}",
            MANIFESTS,
            names=f"host gpu-1: host var {text}",
            setup=inventory(**hv),
            untouched=("out",),
        )
        for name, hv, text in BAD_VARS
        # One per variable: k8s manifests plans through the same code as plan (and CI time is precious).
        if name in ("profile-list", "tier-list", "num-vfs-text", "num-vfs-negative", "pfs-int", "scheme-unknown")
    ),
    Case(
        "plan-pfs-string-is-one-pf",
        ("plan", "-i", INVENTORY, "--json"),
        exit_code=0,
        error_line=False,
        setup=inventory(sriov_physical_functions="ibp23s0"),
        expect=_one_pf,
    ),
    Case(
        "k8s-range-31-for-16-vfs",
        (*MANIFESTS, "--ipam-range", "10.0.0.0/31"),
        exit_code=0,
        error_line=False,
        setup=inventory(sriov_physical_functions="ibp23s0", sriov_num_vfs=8),
        expect=_warns("--ipam-range gives rdma-hgx-h100-ib-ndr-sriov the range 10.0.0.0/31: 0 addresses for 72 VFs"),
    ),
    Case(
        "k8s-rail-range-too-small",
        (*MANIFESTS, "--ipam-range", "10.0.0.0/26"),
        exit_code=0,
        error_line=False,
        setup=per_rail_catalog,
        expect=_warns("rdma-hgx-h100-ib-ndr-sriov-rail0 the range 10.0.0.0/29: 6 addresses for 16 VFs"),
    ),
    Case(
        "k8s-rdma-overlaps-storage",
        (
            *MANIFESTS,
            "--ipam-range",
            "10.0.0.0/16",
            "--storage-interface",
            "eth1",
            "--storage-ipam-range",
            "10.0.8.0/24",
        ),
        exit_code=0,
        error_line=False,
        setup=inventory(),
        expect=_warns("10.0.0.0/16 (rdma-hgx-h100-ib-ndr-sriov) overlaps 10.0.8.0/24 (storage-ipvlan)"),
    ),
    Case(
        "k8s-placeholder-overlaps-storage",
        (*MANIFESTS, *STORAGE, "--storage-ipam-range", "192.168.0.0/24"),
        exit_code=0,
        error_line=False,
        setup=inventory(),
        expect=_warns("192.168.0.0/17 (rdma-hgx-h100-ib-ndr-sriov) overlaps 192.168.0.0/24 (storage-ipvlan)"),
    ),
    Case(
        "k8s-hosts-differ",
        MANIFESTS,
        exit_code=0,
        error_line=False,
        setup=inventory(sriov_num_vfs=4),
        expect=_warns("its hosts differ in their VF layout (gpu-0 8 PFs x 8 VFs, gpu-1 8 PFs x 4 VFs)"),
    ),
    Case(
        "k8s-enough-room-no-warning",
        (
            *MANIFESTS,
            "--ipam-range",
            "10.0.0.0/24",
            "--storage-interface",
            "eth1",
            "--storage-ipam-range",
            "10.1.0.0/24",
        ),
        exit_code=0,
        error_line=False,
        setup=inventory(),
        expect=_no_range_warning,
    ),
    Case(
        "k8s-range-not-cidr",
        (*MANIFESTS, "--ipam-range", "10.0.0.0/33"),
        names="--ipam-range '10.0.0.0/33' is not a network in CIDR notation",
        setup=inventory(),
        untouched=("out",),
    ),
    Case(
        "k8s-range-host-bits",
        (*MANIFESTS, "--ipam-range", "10.0.0.1/24"),
        names="--ipam-range '10.0.0.1/24' is not a network",
        setup=inventory(),
        untouched=("out",),
    ),
    Case(
        "k8s-storage-range-not-cidr",
        (*MANIFESTS, *STORAGE, "--storage-ipam-range", "storage"),
        names="--storage-ipam-range 'storage' is not a network",
        setup=inventory(),
        untouched=("out",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_host_vars_and_ranges(case: Case, tmp_path: Path) -> None:
    run(case, tmp_path)
