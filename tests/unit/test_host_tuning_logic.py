# SPDX-License-Identifier: Apache-2.0
"""The host_tuning role's logic: its plan (plugins/module_utils/host_tuning.py: values from the variables or the
profile, unmanaged, bad values, the IOMMU parameter per architecture), the mstconfig query it reads (recorded-form
outputs in mstflint's layout: pending next boot, the hidden parameter), and its script
(roles/host_tuning/files/gpufabric-pcie-acs) run as a subprocess over SIMULATED sysfs trees in a temporary directory,
with molecule/host_tuning's TEST-DOUBLE setpci first on PATH (never the real /sys or setpci)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from gpufabric.collection import module_utils, plugin_utils
from gpufabric.simulated_hw import write_tree
from tests.conftest import recorded_facts

host_tuning = module_utils("host_tuning")
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "host_tuning" / "files" / "gpufabric-pcie-acs"
TEST_DOUBLES = REPO / "molecule" / "host_tuning" / "files" / "test_doubles.py"
CATALOG = plugin_utils("fabric_catalog").load_catalog()
HGX = CATALOG.get("baremetal/hgx-h100-ib-ndr")
PROFILE_SECTION = {
    "acs": "disabled",
    "iommu": "passthrough",
    "nic_pci_write_ordering": "per_mkey",
    "cpu_governor": "performance",
    "source": "NCCL troubleshooting guide",
}
HOST_PLAN = {"profile": "baremetal/hgx-h100-ib-ndr", "host_tuning": PROFILE_SECTION}
DEFAULTS = {
    "acs": "",
    "iommu": "",
    "nic_pci_write_ordering": "",
    "cpu_governor": "",
    "irqbalance": "",
    "bake": False,
    "hw_root": "/",
    "grub_dropin": "/etc/default/grub.d/99-gpufabric-host-tuning.cfg",
}


def plan(settings=None, host_plan=None, **facts):
    return host_tuning.plan(
        {**DEFAULTS, **(settings or {})},
        HOST_PLAN if host_plan is None else host_plan,
        recorded_facts("ubuntu2204", **facts),
    )


def values(result):
    return {name: setting["value"] for name, setting in result["settings"].items()}


# ---------------------------------------------------------------- the plan


def test_the_profile_gives_what_the_variables_leave_empty():
    result = plan()
    assert result["errors"] == []
    assert values(result) == {
        "acs": "disabled",
        "iommu": "passthrough",
        "nic_pci_write_ordering": "per_mkey",
        "cpu_governor": "performance",
        "irqbalance": "",
    }
    assert result["settings"]["acs"]["source"] == "profile baremetal/hgx-h100-ib-ndr"
    assert result["settings"]["irqbalance"]["source"] == (
        "left alone: neither host_tuning_irqbalance nor profile baremetal/hgx-h100-ib-ndr sets it"
    )
    assert result["profile_source"] == "NCCL troubleshooting guide"


def test_a_variable_beats_the_profile_and_unmanaged_opts_out():
    result = plan({"nic_pci_write_ordering": "force_relax", "acs": "unmanaged", "irqbalance": "disabled"})
    assert values(result)["nic_pci_write_ordering"] == "force_relax"
    assert result["settings"]["nic_pci_write_ordering"]["source"] == "host_tuning_nic_pci_write_ordering"
    assert values(result)["acs"] == "" and result["settings"]["acs"]["source"] == "host_tuning_acs: unmanaged"
    assert values(result)["irqbalance"] == "disabled"


@pytest.mark.parametrize("host_plan", [{}, {"profile": "gcp/a3-ultragpu-8g", "host_tuning": None}])
def test_without_a_profile_section_only_the_variables_count(host_plan):
    assert set(values(plan(host_plan=host_plan)).values()) == {""}
    result = plan({"iommu": "passthrough"}, host_plan=host_plan)
    assert values(result)["iommu"] == "passthrough" and result["packages"] == []


def test_what_each_setting_installs_writes_and_enables():
    result = plan({"irqbalance": "enabled"})
    settings = result["settings"]
    assert result["packages"] == ["irqbalance", "mstflint", "pciutils"]
    assert settings["acs"]["files"] == [
        "/usr/local/sbin/gpufabric-pcie-acs",
        "/etc/systemd/system/gpufabric-pcie-acs.service",
    ]
    assert settings["acs"]["units"] == ["gpufabric-pcie-acs.service"]
    assert settings["cpu_governor"]["units"] == ["gpufabric-cpu-governor.service"]
    assert settings["iommu"]["files"] == ["/etc/default/grub.d/99-gpufabric-host-tuning.cfg"]
    assert settings["irqbalance"]["units"] == ["irqbalance.service"]
    # irqbalance disabled is stopped where it is installed: nothing installed, no unit enabled.
    disabled = plan({"irqbalance": "disabled"})["settings"]["irqbalance"]
    assert (disabled["packages"], disabled["units"]) == ([], [])


@pytest.mark.parametrize(("architecture", "parameter"), [("x86_64", "iommu=pt"), ("aarch64", "iommu.passthrough=1")])
def test_the_iommu_parameter_follows_the_architecture(architecture, parameter):
    assert plan(architecture=architecture)["iommu_parameter"] == parameter


def test_an_architecture_without_a_parameter_is_refused_by_name():
    (error,) = plan(architecture="ppc64le")["errors"]
    assert error.startswith(
        "profile baremetal/hgx-h100-ib-ndr asks for IOMMU passthrough, but this host's architecture"
    )
    assert "'ppc64le'" in error and "x86_64 (iommu=pt), aarch64 (iommu.passthrough=1)" in error
    assert plan({"iommu": "unmanaged"}, architecture="ppc64le")["errors"] == []


@pytest.mark.parametrize(
    ("settings", "host_plan", "message"),
    [
        (
            {"acs": "off"},
            None,
            "host_tuning_acs 'off' is not accepted; accepted: '' (the profile's), disabled, unmanaged",
        ),
        ({"acs": False}, None, "host_tuning_acs False is not accepted"),
        (
            {"nic_pci_write_ordering": "relaxed"},
            None,
            "host_tuning_nic_pci_write_ordering 'relaxed' is not accepted; accepted: '' (the profile's), per_mkey, "
            "force_relax, unmanaged",
        ),
        (
            {"cpu_governor": "Performance"},
            None,
            "host_tuning_cpu_governor 'Performance' is not accepted; accepted: '' (the profile's), unmanaged, or a "
            "cpufreq governor name",
        ),
        ({"irqbalance": "on"}, None, "host_tuning_irqbalance 'on' is not accepted"),
        (
            {},
            {"profile": "p", "host_tuning": {"iommu": "strict"}},
            "profile p's host_tuning.iommu 'strict' is not accepted; accepted: passthrough",
        ),
        (
            {"hw_root": "simulated-hw"},
            None,
            "host_tuning_hw_root 'simulated-hw' is not accepted; accepted: an absolute",
        ),
        (
            {"grub_dropin": "/etc/default/grub.d/iommu.conf"},
            None,
            "host_tuning_grub_dropin '/etc/default/grub.d/iommu.conf' is not accepted; accepted: "
            "/etc/default/grub.d/<name>.cfg",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_variable_the_value_and_what_is_accepted(settings, host_plan, message):
    (error,) = plan(settings, host_plan)["errors"]
    assert error.startswith(message), error


@pytest.mark.parametrize(
    ("hw_root", "sysfs_root"),
    [("/", "/sys"), ("/simulated-hw", "/simulated-hw/sys"), ("/simulated-hw/", "/simulated-hw/sys")],
)
def test_the_sysfs_tree_is_the_hardware_roots_sys(hw_root, sysfs_root):
    assert plan({"hw_root": hw_root})["sysfs_root"] == sysfs_root


def test_no_sysfs_tree_is_named_when_the_input_is_refused():
    assert plan({"hw_root": "relative"})["sysfs_root"] == ""


def test_the_filter_is_the_role_plan_shape():
    from ansible_collections.gpufabric.cluster.plugins.filter.host_tuning_plan import FilterModule

    function = FilterModule().filters()["host_tuning_plan"]
    assert function(DEFAULTS, plan={}, facts={"architecture": "x86_64"})["errors"] == []
    with pytest.raises(AnsibleFilterError, match="plan= is NoneType"):
        function(DEFAULTS, facts={})


# ---------------------------------------------------------------- mstconfig query (mstflint's layout)

# `mstconfig -d 0000:13:00.0 -e q` on a ConnectX-7 that an earlier tool forced to relaxed ordering and this role set
# back to per_mkey for the next boot (no reboot yet); the layout of mstflint's mlxcfg_ui.cpp, as
# k8snetworkplumbingwg/sriov-network-operator's mellanox_test.go records it for other settings.
PENDING = """
Device #1:
----------

Device type:        ConnectX7
Name:               MCX75310AAS-NEA_Ax
Description:        NVIDIA ConnectX-7 HHHL Adapter Card; 400GbE / NDR IB (default mode); Single-port OSFP
Device:             0000:13:00.0

Configurations:                                     Default              Current              Next Boot
        MEMIC_BAR_SIZE                              0                    0                    0
        SRIOV_EN                                    False(0)             False(0)             False(0)
        NUM_OF_VFS                                  0                    0                    0
*       ADVANCED_PCI_SETTINGS                       False(0)             True(1)              True(1)
*       PCI_WR_ORDERING                             per_mkey(0)          force_relax(1)       per_mkey(0)
        LINK_TYPE_P1                                IB(1)                IB(1)                IB(1)
The '*' shows parameters with next value different from default/current value.
"""
# The same card with ADVANCED_PCI_SETTINGS off (the default): the firmware does not list PCI_WR_ORDERING.
HIDDEN = "\n".join(line for line in PENDING.splitlines() if "PCI_WR_ORDERING" not in line).replace(
    "*       ADVANCED_PCI_SETTINGS                       False(0)             True(1)              True(1)",
    "        ADVANCED_PCI_SETTINGS                       False(0)             False(0)             False(0)",
)
# Without -e only the Next Boot column is printed.
NEXT_BOOT_ONLY = """
Device #1:
----------

Device type:    ConnectX7
Device:         0000:13:00.0

Configurations:                              Next Boot
         ADVANCED_PCI_SETTINGS               True(1)
         PCI_WR_ORDERING                     force_relax(1)
"""


def test_the_shared_parser_reads_the_query_column_by_column():
    firmware = module_utils("sriov_firmware")
    settings = firmware.parse_query(PENDING, keys=("PCI_WR_ORDERING",))
    ordering = settings["PCI_WR_ORDERING"]
    assert [ordering[column]["text"] for column in ("default", "current", "next")] == [
        "per_mkey(0)",
        "force_relax(1)",
        "per_mkey(0)",
    ]
    assert ordering["current"]["number"] == 1 and list(settings) == ["PCI_WR_ORDERING"]
    assert firmware.parse_query(NEXT_BOOT_ONLY, keys=("PCI_WR_ORDERING",))["PCI_WR_ORDERING"]["current"] is None
    failed = host_tuning.write_ordering("0000:13:00.0", "-E- Failed to open the device\n", "per_mkey")
    assert "printed no 'Configurations:' table" in failed["error"]


def test_a_pending_next_boot_needs_no_set_but_a_reboot():
    result = host_tuning.write_ordering("0000:13:00.0", PENDING, "per_mkey")
    assert result["set_args"] == [] and result["error"] == ""
    assert result["reboot"] == (
        "0000:13:00.0: PCI_WR_ORDERING force_relax(1) now, per_mkey after a reboot (or mstfwreset)"
    )


def test_a_differing_next_boot_is_set():
    result = host_tuning.write_ordering("0000:13:00.0", PENDING, "force_relax")
    assert result["set_args"] == ["PCI_WR_ORDERING=force_relax"]
    assert result["reboot"] == ""  # the running firmware already forces relaxed ordering
    without_current = host_tuning.write_ordering("0000:13:00.0", NEXT_BOOT_ONLY, "per_mkey")
    assert without_current["set_args"] == ["PCI_WR_ORDERING=per_mkey"]
    assert without_current["reboot"].startswith("0000:13:00.0: PCI_WR_ORDERING unknown now, per_mkey after a reboot")


def test_a_hidden_parameter_is_the_firmware_default():
    per_mkey = host_tuning.write_ordering("0000:13:00.0", HIDDEN, "per_mkey")
    assert (per_mkey["hidden"], per_mkey["set_args"], per_mkey["reboot"]) == (True, [], "")
    force = host_tuning.write_ordering("0000:13:00.0", HIDDEN, "force_relax")
    assert force["set_args"] == ["ADVANCED_PCI_SETTINGS=1", "PCI_WR_ORDERING=force_relax"]
    assert force["reboot"].startswith("0000:13:00.0: PCI_WR_ORDERING per_mkey(0) now, force_relax after a reboot")


def test_the_filter_splits_the_query_task_output_and_names_failed_queries():
    from ansible_collections.gpufabric.cluster.plugins.filter.host_tuning_write_ordering import FilterModule

    compare = FilterModule().filters()["host_tuning_write_ordering"]
    output = (
        f"### 0000:13:00.0\n{PENDING}\n### rc 0\n"
        "### 0000:14:00.0\n-E- Failed to open the device\n### rc 3\n"
        "### 0000:15:00.0\nnothing here\n### rc 0\n"
    )
    result = compare(output, "per_mkey")
    assert [device["device"] for device in result["devices"]] == ["0000:13:00.0"]
    assert result["reboot_required"] == [result["devices"][0]["reboot"]]
    assert result["errors"] == [
        "mstconfig -d 0000:14:00.0 -e q exited 3: -E- Failed to open the device",
        "mstconfig query of 0000:15:00.0 printed no 'Configurations:' table; accepted: the output of "
        "mstconfig -e -d 0000:15:00.0 q (mstflint) for a ConnectX device",
    ]
    assert compare("", "per_mkey") == {"devices": [], "reboot_required": [], "errors": []}
    with pytest.raises(AnsibleFilterError, match="wanted 'relaxed' is not accepted"):
        compare(output, "relaxed")


# ---------------------------------------------------------------- the script over SIMULATED trees

# One PCIe switch (2 GPUs, 2 NICs) keeps the test fast: root port, upstream port and 4 downstream ports on their
# path; the management NIC's and the 4 NVSwitches' root ports off it.
SMALL_HGX = {
    **HGX,
    "gpu": {**HGX["gpu"], "count": 2},
    "nics": {**HGX["nics"], "gpu": {**HGX["nics"]["gpu"], "count": 2}},
}
ROOT_PORT, UPSTREAM = "0000:12:01.0", "0000:13:00.0"
DOWNSTREAM = [f"0000:14:{slot:02x}.0" for slot in range(4)]


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    """The SIMULATED tree's sysfs root, with the TEST-DOUBLE setpci first on PATH over its own state."""
    sysfs = write_tree(SMALL_HGX, tmp_path / "tree") / "sys"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    setpci = bin_dir / "setpci"
    setpci.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{TEST_DOUBLES}" setpci "$@"\n')
    setpci.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUFABRIC_TEST_STATE_DIR": str(tmp_path / "state")}
    subprocess.run([sys.executable, str(TEST_DOUBLES), "init", "--sysfs-root", str(sysfs)], env=env, check=True)
    return {"sysfs": sysfs, "env": env, "state": tmp_path / "state" / "setpci.json"}


def run(host, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--sysfs-root", str(host["sysfs"])],
        capture_output=True,
        text=True,
        env=host["env"],
        timeout=60,
        check=False,
    )


def acs_state(host) -> dict[str, str | None]:
    return json.loads(host["state"].read_text())["acs"]


def test_status_lists_the_bridges_on_the_gpu_and_nic_paths_only(host):
    done = run(host, "status")
    assert done.returncode == 0, done.stderr
    # The switch's upstream port has no ACS capability (setpci exits 1, "not found"): null, not an error.
    assert json.loads(done.stdout) == {ROOT_PORT: "001d", UPSTREAM: None, **dict.fromkeys(DOWNSTREAM, "001d")}
    assert len(acs_state(host)) == 6 + 5  # the management NIC's and the NVSwitches' root ports too


def test_apply_turns_acs_off_on_the_path_and_nowhere_else_then_finds_nothing_to_do(host):
    before = acs_state(host)
    done = run(host, "apply")
    assert done.returncode == 0, done.stderr
    changed = [ROOT_PORT, *DOWNSTREAM]
    assert done.stdout.splitlines() == [f"{bridge}: ACS Control 001d -> 0000" for bridge in changed]
    after = acs_state(host)
    assert {bridge: after[bridge] for bridge in changed} == dict.fromkeys(changed, "0000")
    assert {bridge: value for bridge, value in after.items() if bridge not in changed} == {
        bridge: value for bridge, value in before.items() if bridge not in changed
    }
    again = run(host, "apply")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_a_write_that_does_not_stick_fails_naming_the_bridge(host):
    state = json.loads(host["state"].read_text())
    state["stuck"] = [DOWNSTREAM[2]]
    host["state"].write_text(json.dumps(state))
    done = run(host, "apply")
    assert done.returncode == 1
    assert f"{DOWNSTREAM[2]}: ACS Control is 001d after writing 0000 (was 001d)" in done.stderr
    assert acs_state(host)[DOWNSTREAM[1]] == "0000"  # the others were still written


def test_without_setpci_the_script_says_which_package(host):
    host["env"]["PATH"] = "/nonexistent"
    done = run(host, "status")
    assert done.returncode == 2 and "setpci is not on PATH: install pciutils" in done.stderr


def test_devices_names_the_connectx_physical_functions_not_the_vfs(tmp_path: Path):
    # GCP passes ConnectX virtual functions through, with their physical function beside them (physfn link).
    sysfs = write_tree(CATALOG.get("gcp/a3-ultragpu-8g"), tmp_path / "tree") / "sys"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "devices", "--sysfs-root", str(sysfs)], capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout)
    assert len(found["gpus"]) == 8 and len(found["connectx"]) == 16
    assert all(address.endswith(".0") for address in found["connectx_physical_functions"])
    assert len(found["connectx_physical_functions"]) == 8


def add_cpufreq(sysfs: Path, cpus: int, governor: str = "schedutil") -> None:
    """What a cpufreq driver shows (SIMULATED): each CPU's governor and the governors it offers."""
    for cpu in range(cpus):
        cpufreq = sysfs / f"devices/system/cpu/cpu{cpu}/cpufreq"
        cpufreq.mkdir(parents=True)
        (cpufreq / "scaling_governor").write_text(f"{governor}\n")
        (cpufreq / "scaling_available_governors").write_text(
            "conservative ondemand userspace powersave performance schedutil\n"
        )


def test_the_governor_is_read_and_set_where_it_differs(host):
    add_cpufreq(host["sysfs"], 11)
    read = json.loads(run(host, "governor").stdout)
    assert list(read["governors"]) == [f"cpu{cpu}" for cpu in range(11)]  # cpu10 after cpu9
    assert "performance" in read["available"]
    (host["sysfs"] / "devices/system/cpu/cpu3/cpufreq/scaling_governor").write_text("performance\n")
    done = run(host, "governor", "--set", "performance")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 10 and "cpu0: governor schedutil -> performance" in done.stdout
    assert set(json.loads(run(host, "governor").stdout)["governors"].values()) == {"performance"}
    assert run(host, "governor", "--set", "performance").stdout == ""


def test_a_governor_the_cpus_do_not_offer_fails_and_no_cpufreq_is_nothing_to_do(host):
    assert json.loads(run(host, "governor").stdout) == {"available": [], "governors": {}}
    assert run(host, "governor", "--set", "performance").returncode == 0
    add_cpufreq(host["sysfs"], 2)
    done = run(host, "governor", "--set", "turbo")
    assert done.returncode == 1 and "governor turbo is not offered by every CPU; available: conservative" in done.stderr


def test_the_script_runs_on_python_3_9_syntax():
    # The boot script runs on the host's python3: no syntax newer than Ubuntu 22.04's and Debian 12's needs.
    ast.parse(SCRIPT.read_text(encoding="utf-8"), feature_version=(3, 9))
    assert os.access(SCRIPT, os.X_OK)
