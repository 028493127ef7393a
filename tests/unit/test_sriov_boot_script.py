# SPDX-License-Identifier: Apache-2.0
"""roles/sriov/files/gpufabric-sriov-apply, the boot script, run as a process against a SIMULATED tree.

A watch-mode simulated kernel (gpufabric.simulated_sriov) reacts to its writes and an ``ip`` stand-in on
PATH answers for the tree's devices, so the script runs unchanged, as systemd would start it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpufabric import simulated_sriov
from gpufabric.collection import collection_root, module_utils, plugin_utils
from gpufabric.simulated_hw import write_tree
from gpufabric.simulated_sriov_host import SimulatedSriovHost

sriov = module_utils("sriov")
catalog = plugin_utils("fabric_catalog").load_catalog()
SCRIPT = collection_root() / "roles/sriov/files/gpufabric-sriov-apply"
LIB = collection_root() / "plugins/module_utils"
PF, NETDEV = "0000:17:00.0", "ibp23s0"


@pytest.fixture
def tree(sriov_tree: Path) -> Path:
    return sriov_tree


def write_config(tree: Path, **top: object) -> Path:
    path = tree.parent / "sriov.json"
    path.write_text(json.dumps({"sysfs_root": str(tree), "physical_functions": [], "select": None, **top}))
    return path


def boot(tree: Path, config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{tree.parent / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--config", str(config), "--lib", str(LIB), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def state(tree: Path) -> list[dict[str, object]]:
    """Every PF's VFs as sriov.read_state sees them (in-process host: reads only)."""
    host = SimulatedSriovHost(tree)
    return [sriov.read_state(host, sriov.resolve_pf(host, pf, "pf")) for pf in sriov.select_pfs(host, ["15b3:1021"])]


def reset(tree: Path) -> None:
    subprocess.run([sys.executable, simulated_sriov.__file__, "reset", "--root", str(tree)], check=True)


ENTRIES = [
    {"pf": NETDEV, "num_vfs": 4},
    {"pf": "0000:18:00.0", "num_vfs": 2, "address_scheme": "explicit",
     "vfs": [{"index": 0, "guid": "02:00:00:00:00:00:18:01"}, {"index": 1, "guid": "0200:0000:0000:1802"}]},
]  # fmt: skip


def test_boot_reproduces_what_the_module_set(tree, tmp_path):
    # The live run (the module's code, in-process) sets the VFs on an identical tree (the watching kernel of
    # ``tree`` must not see in-process writes); the boot script must rebuild the same from its config.
    twin = write_tree(catalog.get("baremetal/hgx-h100-ib-ndr-sriov"), tmp_path / "twin")
    host = SimulatedSriovHost(twin)
    for entry in ENTRIES:
        sriov.apply_pf(host, entry["pf"], {k: v for k, v in entry.items() if k != "pf"}, check_mode=False)
    wanted = state(twin)
    assert [pf["num_vfs"] for pf in wanted[:3]] == [4, 2, 0]
    boot(tree, write_config(tree, physical_functions=[{"pf": NETDEV, "num_vfs": 1}]))
    reset(tree)  # a fresh boot: no VFs
    assert all(pf["num_vfs"] == 0 for pf in state(tree))
    config = write_config(tree, physical_functions=ENTRIES)

    checked = boot(tree, config, "--check")
    assert checked.returncode == 3, checked.stderr
    assert f"differs: {PF}: sriov_numvfs 0 -> 4" in checked.stdout.splitlines()
    assert all(pf["num_vfs"] == 0 for pf in state(tree))  # --check wrote nothing

    done = boot(tree, config)
    assert done.returncode == 0, done.stderr
    assert f"{PF}: sriov_numvfs 0 -> 4" in done.stdout.splitlines()
    assert state(tree) == wanted
    assert (tree / simulated_sriov.REFUSALS_LOG).exists() is False  # the kernel refused nothing

    again = boot(tree, config)
    assert again.returncode == 0
    assert again.stdout.splitlines() == [f"{PF}: 4 VFs as configured", "0000:18:00.0: 2 VFs as configured"]
    assert boot(tree, config, "--check").returncode == 0


def test_boot_expands_select(tree):
    config = write_config(
        tree,
        physical_functions=[{"pf": NETDEV, "num_vfs": 3}],
        select={"pci_ids": ["15b3:1021"], "settings": {"num_vfs": 2, "rebind": False}},
    )
    done = boot(tree, config)
    assert done.returncode == 0, done.stderr
    counts = [pf["num_vfs"] for pf in state(tree)]
    assert counts == [3, 2, 2, 2, 2, 2, 2, 2]
    guids = [vf["node_guid"] for pf in state(tree) for vf in pf["vfs"]]
    assert len(set(guids)) == len(guids) == 17
    # Changing the count after a boot goes through 0 (the kernel would refuse 3 -> 5 otherwise).
    config = write_config(tree, physical_functions=[{"pf": NETDEV, "num_vfs": 5}])
    changed = boot(tree, config)
    assert changed.returncode == 0, changed.stderr
    assert f"{PF}: sriov_numvfs 3 -> 0 -> 5" in changed.stdout.splitlines()


def test_bad_config_exits_2(tree):
    bad = write_config(tree, physical_functions=[{"pf": NETDEV, "num_vfs": "many"}])
    result = boot(tree, bad)
    assert (result.returncode, result.stdout) == (2, "")
    assert "physical_functions[0].num_vfs 'many' has the wrong type" in result.stderr
    missing = boot(tree, tree.parent / "absent.json")
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr


def test_apply_failure_exits_1_and_writes_nothing(tree):
    config = write_config(
        tree, physical_functions=[{"pf": NETDEV, "num_vfs": 2}, {"pf": "0000:18:00.0", "num_vfs": 99}]
    )
    result = boot(tree, config)
    assert result.returncode == 1
    assert "num_vfs 99 is above sriov_totalvfs 16 of 0000:18:00.0" in result.stderr
    assert all(pf["num_vfs"] == 0 for pf in state(tree))


def test_library_missing_exits_2(tmp_path):
    config = tmp_path / "c.json"
    config.write_text("{}")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--config", str(config), "--lib", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "cannot import sriov" in result.stderr
