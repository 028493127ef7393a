# SPDX-License-Identifier: Apache-2.0
"""module_utils/sriov.py against SIMULATED trees, in-process (SimulatedSriovHost reacts like the kernel).

What the sriov_vfs module and the boot script do is this code; they only add argument parsing and output.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import write_tree
from gpufabric.simulated_sriov_host import SimulatedSriovHost

sriov = module_utils("sriov")
catalog = plugin_utils("fabric_catalog").load_catalog()
IB_PF, IB_NETDEV = "0000:17:00.0", "ibp23s0"  # first HCA of baremetal/hgx-h100-ib-ndr-sriov, mlx5_0
ETH_PF, ETH_NETDEV = "0000:17:00.0", "enp23s0np0"  # first NIC of baremetal/hgx-h100-roce-400g
NUMVFS = f"/sys/bus/pci/devices/{IB_PF}/sriov_numvfs"


@pytest.fixture
def ib(tmp_path: Path) -> SimulatedSriovHost:
    """8 ConnectX-7 InfiniBand PFs with sriov_totalvfs 16."""
    return SimulatedSriovHost(write_tree(catalog.get("baremetal/hgx-h100-ib-ndr-sriov"), tmp_path / "ib"))


@pytest.fixture
def eth(tmp_path: Path) -> SimulatedSriovHost:
    """8 ConnectX-7 RoCE (Ethernet) PFs with sriov_totalvfs 8."""
    root = write_tree(catalog.get("baremetal/hgx-h100-roce-400g"), tmp_path / "eth", sriov_totalvfs=8)
    return SimulatedSriovHost(root)


def apply(host: SimulatedSriovHost, pf: str, check_mode: bool = False, **settings: Any) -> dict[str, Any]:
    return sriov.apply_pf(host, pf, settings, check_mode=check_mode)


def refused(host: SimulatedSriovHost, pf: str, pattern: str, **settings: Any) -> None:
    """The request fails with one message matching ``pattern`` and writes and runs nothing but reads."""
    with pytest.raises(sriov.SriovError, match=pattern):
        apply(host, pf, **settings)
    assert host.writes == []
    assert not [argv for argv in host.commands if argv[1:3] == ["link", "set"]]


def forget(host: SimulatedSriovHost) -> None:
    host.writes.clear()
    host.commands.clear()


def numvfs_writes(host: SimulatedSriovHost) -> list[str]:
    return [value for path, value in host.writes if path.endswith("/sriov_numvfs")]


def snapshot(root: str) -> dict[str, bytes | str]:
    state: dict[str, bytes | str] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(top) / name
            state[str(path)] = os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else ""
    return state


# ---------------------------------------------------------------------------
# The count: totalvfs 0 / 8 / 16, through 0, never above the total
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("total", [0, 8, 16])
def test_totalvfs(ib, total):
    Path(ib.local(f"/sys/bus/pci/devices/{IB_PF}/sriov_totalvfs")).write_text(f"{total}\n")
    if total == 0:
        refused(ib, IB_NETDEV, r"not SR-IOV capable \(sriov_totalvfs reads 0\).*mstconfig", num_vfs=1)
        return
    result = apply(ib, IB_NETDEV, num_vfs=total)
    assert result["after"]["num_vfs"] == len(result["after"]["vfs"]) == total
    forget(ib)
    refused(
        ib,
        IB_NETDEV,
        rf"num_vfs {total + 1} is above sriov_totalvfs {total} of {IB_PF} \({IB_NETDEV}\)",
        num_vfs=total + 1,
    )


def test_change_goes_through_zero(ib):
    apply(ib, IB_PF, num_vfs=4)
    forget(ib)
    result = apply(ib, IB_PF, num_vfs=8)
    # The simulated kernel raises EBUSY for 4 -> 8 (test_simulated_sriov), so this sequence is the only way.
    assert numvfs_writes(ib) == ["0", "8"]
    assert result["actions"][0] == f"{IB_PF}: sriov_numvfs 4 -> 0 -> 8"
    assert [vf["index"] for vf in result["after"]["vfs"]] == list(range(8))
    forget(ib)
    assert apply(ib, IB_PF, num_vfs=0)["actions"] == [f"{IB_PF}: sriov_numvfs 8 -> 0"]
    assert numvfs_writes(ib) == ["0"]


def test_above_total_writes_nothing(ib):
    refused(ib, IB_PF, r"num_vfs 17 is above sriov_totalvfs 16 .* give 0\.\.16", num_vfs=17)


def test_nonexistent_pf_lists_the_capable_ones(ib):
    refused(ib, "ib9", r"'ib9' is neither .*SR-IOV capable here: 0000:17:00.0 \(ibp23s0\), 0000:18:00.0", num_vfs=1)
    refused(ib, "0000:99:00.0", r"'0000:99:00.0' is neither", num_vfs=1)


def test_short_pci_address_means_domain_0000(ib):
    assert apply(ib, "17:00.0", num_vfs=0)["pf"]["pci_address"] == IB_PF


def test_a_vf_is_not_a_pf(ib):
    apply(ib, IB_PF, num_vfs=2)
    forget(ib)
    refused(ib, "0000:17:00.1", r"is a virtual function; give its physical function 0000:17:00.0", num_vfs=1)
    refused(ib, "ibp23s0v1", r"is a virtual function", num_vfs=1)


def test_a_device_without_sr_iov(ib):
    virtio = os.path.basename(os.path.dirname(os.path.realpath(ib.local("/sys/class/net/eno1/device"))))
    refused(ib, virtio, rf"'{virtio}' \({virtio}\) is not SR-IOV capable \(sriov_totalvfs is absent\)", num_vfs=1)


# ---------------------------------------------------------------------------
# InfiniBand GUIDs
# ---------------------------------------------------------------------------


def vf_rdma_guid(host: SimulatedSriovHost, vf_address: str) -> str:
    base = f"/sys/bus/pci/devices/{vf_address}/infiniband"
    return host.read(f"{base}/{host.listdir(base)[0]}/node_guid")


def test_derived_guids_and_rebind(ib):
    pf = sriov.resolve_pf(ib, IB_PF, "pf")
    assert pf["pf_guid"] == "b8:ce:f6:03:00:12:00:01"  # simulated_hw's node_guid b8ce:f603:0012:0001
    result = apply(ib, IB_PF, num_vfs=3)
    vfs = result["after"]["vfs"]
    assert [vf["node_guid"] for vf in vfs] == [f"02:03:00:12:00:01:00:0{n + 1}" for n in range(3)]
    assert all(vf["port_guid"] == vf["node_guid"] for vf in vfs)
    binds = [(path.rsplit("/", 1)[1], value) for path, value in ib.writes if "/drivers/" in path]
    assert binds[:2] == [("unbind", "0000:17:00.1"), ("bind", "0000:17:00.1")]
    assert len(binds) == 6
    # The rebind made the GUID take effect: the VF's RDMA device runs with it.
    assert vf_rdma_guid(ib, "0000:17:00.1") == "0203:0012:0001:0001"
    assert f"{IB_PF}: vf 0 rebind 0000:17:00.1 so the new GUIDs take effect" in result["actions"]


def test_explicit_guids_in_both_formats_and_no_rebind(ib):
    vfs = [
        {"index": 0, "guid": "0200:0000:0000:00AA"},
        {"index": 1, "node_guid": "02:00:00:00:00:00:00:bb", "port_guid": "02:00:00:00:00:00:01:bb"},
    ]
    result = apply(ib, IB_PF, num_vfs=2, address_scheme="explicit", vfs=vfs, rebind=False)
    got = [(vf["node_guid"], vf["port_guid"]) for vf in result["after"]["vfs"]]
    assert got == [
        ("02:00:00:00:00:00:00:aa", "02:00:00:00:00:00:00:aa"),
        ("02:00:00:00:00:00:00:bb", "02:00:00:00:00:00:01:bb"),
    ]
    assert not [path for path, _value in ib.writes if "/drivers/" in path]
    assert vf_rdma_guid(ib, "0000:17:00.1") == "0000:0000:0000:0000"  # set, not yet in effect


def test_changing_one_guid_rebinds_only_that_vf(ib):
    apply(ib, IB_PF, num_vfs=2)
    forget(ib)
    result = apply(ib, IB_PF, num_vfs=2, vfs=[{"index": 1, "guid": "02:00:00:00:00:00:00:77"}])
    assert ib.writes == [
        ("/sys/bus/pci/drivers/mlx5_core/unbind", "0000:17:00.2"),
        ("/sys/bus/pci/drivers/mlx5_core/bind", "0000:17:00.2"),
    ]
    assert result["actions"][0] == f"{IB_PF}: vf 1 node_guid 02:00:00:00:00:00:00:77 (was 02:03:00:12:00:01:00:02)"


# ---------------------------------------------------------------------------
# Ethernet
# ---------------------------------------------------------------------------


def test_ethernet_mac_trust_spoofchk_vlan(eth):
    pf = sriov.resolve_pf(eth, ETH_NETDEV, "pf")
    assert (pf["link_type"], pf["pf_guid"]) == ("ethernet", None)
    vfs = [{"index": 1, "mac": "02:AA:00:00:00:01", "vlan": 0, "trust": False}]
    result = apply(eth, ETH_NETDEV, num_vfs=3, trust=True, spoofchk=True, vlan=100, vfs=vfs)
    after = {vf["index"]: vf for vf in result["after"]["vfs"]}
    octets = pf["pf_mac"].split(":")
    assert after[0]["mac"] == ":".join(["02", *octets[2:], "00"])
    assert after[2]["mac"] == ":".join(["02", *octets[2:], "02"])
    assert (after[0]["trust"], after[0]["spoofchk"], after[0]["vlan"]) == (True, True, 100)
    assert (after[1]["mac"], after[1]["trust"], after[1]["vlan"]) == ("02:aa:00:00:00:01", False, 0)
    assert f"{ETH_PF}: vf 0 vlan 100 (was 0)" in result["actions"]
    assert not [path for path, _value in eth.writes if "/drivers/" in path]  # no rebind on Ethernet
    ip_sets = [argv[5:] for argv in eth.commands if argv[1:3] == ["link", "set"]]
    assert ["vf", "0", "trust", "on"] in ip_sets


# ---------------------------------------------------------------------------
# Bad input: one clear error, nothing written
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "settings", "pattern"),
    [
        (
            "eth",
            {"vfs": [{"index": 0, "mac": "02:00:00:00:00:01"}, {"index": 1, "mac": "02:00:00:00:00:01"}]},
            r"repeat an address: mac 02:00:00:00:00:01 on .* VF 0, .* VF 1",
        ),
        (
            "ib",
            {"vfs": [{"index": 0, "guid": "02:00:00:00:00:00:00:01"}, {"index": 1, "guid": "0200:0000:0000:0001"}]},
            r"repeat an address: node_guid 02:00:00:00:00:00:00:01",
        ),
        (
            "ib",
            {"vfs": [{"index": 0, "guid": "02:00:00:00:00:01"}]},
            r"option vfs\[0\]\.guid '02:00:00:00:00:01' is not a GUID",
        ),
        ("ib", {"vfs": [{"index": 0, "guid": "0000:0000:0000:0000"}]}, r"is not a GUID.*not all zero"),
        ("ib", {"vfs": [{"index": 0, "mac": "02:00:00:00:00:01"}]}, r"vfs\[0\]\.mac is set but .* is infiniband"),
        ("eth", {"vfs": [{"index": 0, "guid": "02:00:00:00:00:00:00:01"}]}, r"node_guid is set but .* is ethernet"),
        ("eth", {"vfs": [{"index": 0, "mac": "01:00:5e:00:00:01"}]}, r"is not a unicast MAC"),
        ("ib", {"trust": True}, r"option trust is set but .* InfiniBand"),
        ("eth", {"vlan": 4096}, r"option vlan 4096 is out of range; give 0\.\.4095"),
        (
            "eth",
            {"vfs": [{"index": 4, "mac": "02:00:00:00:00:01"}]},
            r"vfs\[0\]\.index 4 does not exist with num_vfs 4",
        ),
        ("eth", {"vfs": [{"index": 1}, {"index": 1}]}, r"vfs\[1\]\.index 1 is given twice"),
        (
            "eth",
            {"address_scheme": "explicit", "vfs": [{"index": 0, "mac": "02:00:00:00:00:01"}]},
            r"no mac for VF 1 .* explicit needs one per VF",
        ),
        (
            "eth",
            {"address_scheme": "kernel", "vfs": [{"index": 0, "mac": "02:00:00:00:00:01"}]},
            r"gives an address but address_scheme is kernel",
        ),
        ("eth", {"address_scheme": "random"}, r"address_scheme 'random' is unknown"),
        ("eth", {"vfs": [{"index": 0, "colour": "red"}]}, r"vfs\[0\]\.colour is not a known key"),
        ("eth", {"trust": "yes"}, r"option trust 'yes' has the wrong type; give true or false or null"),
    ],
)
def test_bad_input(request, fixture, settings, pattern):
    host = request.getfixturevalue(fixture)
    pf = IB_NETDEV if fixture == "ib" else ETH_NETDEV
    refused(host, pf, pattern, num_vfs=4, **settings)


def test_bad_input_on_existing_vfs_changes_nothing(ib):
    apply(ib, IB_PF, num_vfs=4)
    before = snapshot(ib.root)
    forget(ib)
    refused(ib, IB_PF, r"above sriov_totalvfs", num_vfs=99)
    assert snapshot(ib.root) == before


# ---------------------------------------------------------------------------
# Idempotence, check mode, diff
# ---------------------------------------------------------------------------


def test_second_apply_changes_nothing(ib):
    first = apply(ib, IB_PF, num_vfs=4)
    forget(ib)
    ib.commands.clear()
    second = apply(ib, IB_PF, num_vfs=4)
    assert (second["changed"], second["actions"], ib.writes) == (False, [], [])
    assert [argv[1:] for argv in ib.commands] == [["-j", "-d", "link", "show", "dev", IB_NETDEV]]
    assert second["before"] == second["after"] == first["after"]


@pytest.mark.parametrize("start", [0, 2])
def test_check_mode_predicts_without_writing(ib, start):
    apply(ib, IB_PF, num_vfs=start)
    before = snapshot(ib.root)
    forget(ib)
    predicted = apply(ib, IB_PF, check_mode=True, num_vfs=5)
    assert ib.writes == []
    assert snapshot(ib.root) == before
    real = apply(ib, IB_PF, num_vfs=5)
    unwas = [re.sub(r" \(was .*\)$", "", action) for action in real["actions"]]
    assert predicted["actions"] == unwas
    assert predicted["changed"] is real["changed"] is True
    # Predicted values are the real ones, except those only the kernel knows (its defaults): null.
    for guess, done in zip(predicted["after"]["vfs"], real["after"]["vfs"], strict=True):
        assert {key: value for key, value in guess.items() if value is not None}.items() <= done.items()
        assert guess["node_guid"] == done["node_guid"]
        assert guess["pci_address"] == done["pci_address"]


def test_diff_shows_before_and_after(ib):
    result = apply(ib, IB_PF, num_vfs=1)
    before, after = sriov.state_text(result["pf"], result["before"]), sriov.state_text(result["pf"], result["after"])
    assert before == f"pf: {IB_PF}\nnetdev: {IB_NETDEV}\nnum_vfs: 0\nvfs: []\n"
    assert "num_vfs: 1\nvfs:\n  - index: 0\n    pci_address: 0000:17:00.1\n" in after
    assert "    node_guid: 02:03:00:12:00:01:00:01\n" in after
    assert "    trust: false\n" in after


def test_timeout_names_the_pf(ib):
    host = sriov.Host(ib.root, runner=ib.run)  # writes land in the files but no kernel reacts
    with pytest.raises(sriov.SriovError, match=rf"{IB_PF}: the kernel did not bring sriov_numvfs to 2 within 1 s"):
        sriov.apply_pf(host, IB_PF, {"num_vfs": 2, "timeout": 1}, check_mode=False)


# ---------------------------------------------------------------------------
# Across PFs: duplicates, select, config
# ---------------------------------------------------------------------------


def test_duplicate_addresses_across_pfs():
    a = [{"index": 0, "mac": "02:00:00:00:00:01"}, {"index": 1, "mac": "00:00:00:00:00:00"}]
    b = [{"index": 3, "mac": "02:00:00:00:00:01"}, {"index": 4, "mac": "00:00:00:00:00:00"}]
    assert sriov.duplicate_addresses([a, b]) == ["mac 02:00:00:00:00:01 on #0 VF 0, #1 VF 3"]
    assert sriov.duplicate_addresses({"ib0": a, "ib1": b[1:]}) == []


def test_select_pfs(ib):
    assert sriov.select_pfs(ib, ["15B3:1021"])[:2] == ["0000:17:00.0", "0000:18:00.0"]
    assert len(sriov.select_pfs(ib, ["15b3:1021"])) == 8
    assert sriov.select_pfs(ib, ["15b3:101d"]) == []


def config(**top: Any) -> str:
    return json.dumps({"sysfs_root": "/", "physical_functions": [], "select": None, **top})


def test_config_applies_every_pf_and_select(ib):
    text = config(
        physical_functions=[{"pf": IB_NETDEV, "num_vfs": 2, "rebind": False}],
        select={"pci_ids": ["15b3:1021"], "settings": {"num_vfs": 1}},
    )
    results = sriov.apply_config(ib, sriov.load_config(text, "sriov.json"), check_mode=False)
    assert [result["after"]["num_vfs"] for result in results] == [2] + [1] * 7
    assert results[0]["pf"]["pci_address"] == IB_PF


def test_config_checks_every_pf_before_the_first_write(ib):
    entries = [
        {
            "pf": IB_PF,
            "num_vfs": 1,
            "address_scheme": "explicit",
            "vfs": [{"index": 0, "guid": "02:00:00:00:00:00:00:05"}],
        },
        {
            "pf": "0000:18:00.0",
            "num_vfs": 1,
            "address_scheme": "explicit",
            "vfs": [{"index": 0, "guid": "0200:0000:0000:0005"}],
        },
    ]
    loaded = sriov.load_config(config(physical_functions=entries), "sriov.json")
    with pytest.raises(
        sriov.SriovError, match=r"sriov.json: two VFs would get one address: node_guid 02:00:00:00:00:00:00:05"
    ):
        sriov.apply_config(ib, loaded, check_mode=False, source="sriov.json")
    bad = sriov.load_config(config(physical_functions=[entries[0], {"pf": "ib9", "num_vfs": 1}]), "sriov.json")
    with pytest.raises(sriov.SriovError, match=r"physical_functions\[1\]\.pf 'ib9' is neither"):
        sriov.apply_config(ib, bad, check_mode=False)
    twice = sriov.load_config(
        config(physical_functions=[{"pf": IB_NETDEV, "num_vfs": 1}, {"pf": IB_PF, "num_vfs": 1}]), "s"
    )
    with pytest.raises(sriov.SriovError, match=r"physical_functions\[1\]\.pf '0000:17:00.0' is 0000:17:00.0, which"):
        sriov.apply_config(ib, twice, check_mode=False)
    assert ib.writes == []


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("{", r"sriov.json is not valid JSON"),
        (config(extra=1), r"sriov.json: extra is not a known key"),
        (config(physical_functions=[{"pf": "ib0"}]), r"physical_functions\[0\]\.num_vfs is missing"),
        (
            config(physical_functions=[{"pf": "ib0", "num_vfs": "8"}]),
            r"num_vfs '8' has the wrong type; give an integer",
        ),
        (config(physical_functions=[{"pf": "ib0", "num_vfs": 8, "trust": 1}]), r"trust 1 has the wrong type"),
        (config(physical_functions=[{"pf": 5, "num_vfs": 8}]), r"physical_functions\[0\]\.pf 5 has the wrong type"),
        (config(select={"pci_ids": ["15b3"], "settings": {"num_vfs": 1}}), r"select.pci_ids entry '15b3' is not"),
        (config(select={"pci_ids": [], "settings": {"num_vfs": 1}}), r"select.pci_ids is empty"),
        (
            config(select={"pci_ids": ["15b3:1021"], "settings": {"num_vfs": 1, "pf": "x"}}),
            r"select.settings.pf is not",
        ),
    ],
)
def test_bad_config(text, pattern):
    with pytest.raises(sriov.SriovError, match=pattern):
        sriov.load_config(text, "sriov.json")


def test_select_that_finds_nothing_is_an_error(ib):
    loaded = sriov.load_config(config(select={"pci_ids": ["8086:1592"], "settings": {"num_vfs": 1}}), "sriov.json")
    with pytest.raises(sriov.SriovError, match=r"select found no physical function with PCI id 8086:1592"):
        sriov.apply_config(ib, loaded, check_mode=True)


def test_module_utils_is_standalone():
    """The role copies sriov.py to hosts as a plain module: standard library only, no collection imports."""
    source = Path(sriov.__file__).read_text()
    imports = re.findall(r"^(?:from|import) (\S+)", source, flags=re.MULTILINE)
    assert set(imports) <= {"__future__", "json", "os", "re", "subprocess", "time", "collections.abc", "typing"}


@pytest.mark.parametrize(
    ("given", "normalized"),
    [
        ({}, {"physical_functions": [], "num_vfs": None, "address_scheme": "derived"}),
        (
            {"physical_functions": "ibp23s0", "num_vfs": 0, "address_scheme": "kernel"},
            {"physical_functions": ["ibp23s0"], "num_vfs": 0, "address_scheme": "kernel"},
        ),
        ({"physical_functions": ["a", "b"], "num_vfs": 16}, {"physical_functions": ["a", "b"], "num_vfs": 16}),
    ],
)
def test_layout_vars_normalize(given, normalized):
    """The one check of the layout host vars (role, plan, k8s manifests): a string is ONE physical function."""
    settings, errors = sriov.layout_vars(given)
    assert errors == []
    assert {key: settings[key] for key in normalized} == normalized


def test_layout_vars_name_every_bad_value():
    _settings, errors = sriov.layout_vars({"physical_functions": 3, "num_vfs": "abc", "address_scheme": "random"})
    assert [error.split(" is not ")[0] for error in errors] == [
        "sriov_physical_functions 3",
        "sriov_num_vfs 'abc'",
        "sriov_address_scheme 'random'",
    ]
