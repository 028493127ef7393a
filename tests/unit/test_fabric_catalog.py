# SPDX-License-Identifier: Apache-2.0
"""The catalog loader: built-in data, overrides, and one clear error per bad input."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from gpufabric import lab_files
from gpufabric.collection import module_utils, plugin_utils

fabric_catalog = plugin_utils("fabric_catalog")
CatalogError = fabric_catalog.CatalogError

REQUIRED_PROFILES = [
    "gcp/a3-highgpu-8g",
    "gcp/a3-edgegpu-8g",
    "gcp/a3-megagpu-8g",
    "gcp/a3-ultragpu-8g",
    "gcp/a4-highgpu-8g",
    "aws/p4d.24xlarge",
    "aws/p4de.24xlarge",
    "aws/p5.48xlarge",
    "aws/p5e.48xlarge",
    "aws/p5en.48xlarge",
    "aws/p6-b200.48xlarge",
    "azure/Standard_ND96isr_H100_v5",
    "azure/Standard_ND96isr_H200_v5",
    "nebius/gpu-h100-sxm",
    "nebius/gpu-h200-sxm",
    "nebius/gpu-b200-sxm",
    "oci/BM.GPU.H100.8",
    "oci/BM.GPU.H200.8",
    "oci/BM.GPU.B200.8",
    "baremetal/hgx-h100-ib-ndr",
    "baremetal/hgx-h100-roce-400g",
    "baremetal/hgx-h100-ib-ndr-sriov",
]


def write(tmp_path: Path, text: str, name: str = "override.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def builtin():
    return fabric_catalog.load_catalog()


def test_builtin_catalog_has_every_required_profile(builtin):
    assert set(REQUIRED_PROFILES) <= set(builtin.names())


@pytest.mark.parametrize("name", REQUIRED_PROFILES)
def test_every_profile_is_complete(builtin, name):
    profile = builtin.get(name)
    assert profile["fabric"] in fabric_catalog.FABRICS
    for tier in fabric_catalog.TIERS:
        assert profile["tiers"][tier]["roles"], f"{name} {tier} has no roles"
        assert "nccl_env" in profile["tiers"][tier]["roles"]
        assert all(isinstance(value, str) for value in profile["tiers"][tier]["env"].values())
    thresholds = profile["bandwidth"]["thresholds"]
    assert all(t["basis"] and t["min_busbw_gbyte_s"] > 0 for t in thresholds)
    assert profile["bandwidth"]["source"]


def test_standard_tier_is_plain_tcp(builtin):
    for name in builtin.names():
        env = builtin.get(name)["tiers"]["standard"]["env"]
        assert env.get("NCCL_NET") == "Socket", name


def test_megagpu_env_carries_the_guest_config_checker_settings(builtin):
    env = builtin.get("gcp/a3-megagpu-8g")["tiers"]["best"]["env"]
    assert env["NCCL_NVLSTREE_MAX_CHUNKSIZE"] == "131072"
    # The host's names, by identity (Google's Ubuntu images: enp6s0,...; tests/unit/test_fabric_nics.py) ...
    assert env["NCCL_FASTRAK_IFNAME"] == "{nics.gpu}"
    assert env["NCCL_FASTRAK_CTRL_DEV"] == env["NCCL_SOCKET_IFNAME"] == "{nics.management}"
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert "NCCL_ALGO" not in env
    # ... GKE's Container-Optimized OS nodes by the kernel's eth names.
    k8s_env = builtin.get("gcp/a3-megagpu-8g")["tiers"]["best"]["k8s_env"]
    assert k8s_env["NCCL_FASTRAK_IFNAME"] == "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"


def test_find_by_cloud_and_instance_type(builtin):
    assert builtin.find("aws", "p5.48xlarge") == "aws/p5.48xlarge"
    assert builtin.find("aws", "m5.large") is None


def test_override_changes_a_value_drops_a_key_and_adds_a_profile(tmp_path):
    override = write(
        tmp_path,
        """
profiles:
  gcp/a3-megagpu-8g:
    tiers:
      best:
        env:
          NCCL_DEBUG: INFO
          NCCL_DEBUG_SUBSYS: null
  baremetal/lab-1node:
    cloud: baremetal
    instance_type: lab-1node
    description: one test node
    gpu: {model: L4, count: 1, nvswitch: false}
    nics:
      gpu: {count: 0, speed_gbit_s: 25, kind: ethernet}
      management: {kind: ethernet}
    fabric: none
    tiers:
      best: {roles: [nccl_env], env: {NCCL_SOCKET_IFNAME: eno1}}
      standard: {roles: [nccl_env], env: {NCCL_NET: Socket, NCCL_SOCKET_NTHREADS: 4}}
    bandwidth:
      line_rate_gbit_s: 25
      source: site measurement
      thresholds:
        - {collective: all_reduce, min_nodes: 1, algo: default, min_size_bytes: 1024,
           min_busbw_gbyte_s: 1, verified: false, basis: guess}
""",
    )
    catalog = fabric_catalog.load_catalog([override])
    env = catalog.get("gcp/a3-megagpu-8g")["tiers"]["best"]["env"]
    assert env["NCCL_DEBUG"] == "INFO"
    assert "NCCL_DEBUG_SUBSYS" not in env
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "{nics.management}"  # untouched keys survive the merge
    assert catalog.origins["gcp/a3-megagpu-8g"] == str(override)
    assert catalog.find("baremetal", "lab-1node") == "baremetal/lab-1node"
    assert catalog.get("baremetal/lab-1node")["tiers"]["standard"]["env"]["NCCL_SOCKET_NTHREADS"] == "4"


def test_override_files_from_env_splits_like_path(tmp_path):
    value = f"{tmp_path / 'a.yml'}:{tmp_path / 'b.yml'}"
    assert fabric_catalog.override_files_from_env({"GPUFABRIC_CATALOG": value}) == [
        tmp_path / "a.yml",
        tmp_path / "b.yml",
    ]


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    fabric: warp\n",
            "profiles.gcp/a3-megagpu-8g.fabric",
            "'warp' is not accepted; accepted: tcpx",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    gpu: {count: eight}\n",
            "profiles.gcp/a3-megagpu-8g.gpu.count",
            "must be an integer >= 1",
        ),
        ("profiles:\n  gcp/a3-megagpu-8g:\n    colour: red\n", "profiles.gcp/a3-megagpu-8g.colour", "unknown key"),
        ("profiles:\n  gcp/new-8g:\n    cloud: gcp\n", "profiles.gcp/new-8g.instance_type", "missing required key"),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    tiers: {best: {env: {NCCL_NVLS_ENABLE: true}}}\n",
            "profiles.gcp/a3-megagpu-8g.tiers.best.env",
            "NCCL_NVLS_ENABLE must be a string (quote it); got bool",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    tiers: {best: {roles: [nccl_env, warp_drive]}}\n",
            "profiles.gcp/a3-megagpu-8g.tiers.best.roles",
            "item 1 ('warp_drive') 'warp_drive' is not accepted",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    instance_type: a3-mega\n",
            "profiles.gcp/a3-megagpu-8g",
            "profile name must be",
        ),
        ("profiles:\n  a3-mega: {}\n", "profiles.a3-mega", "'<cloud>/<instance-type>'"),
        (
            'profiles:\n  gcp/a3-megagpu-8g:\n    tiers: {best: {env: {NCCL_DEBUG: "WARN\\nINFO"}}}\n',
            "profiles.gcp/a3-megagpu-8g.tiers.best.env.NCCL_DEBUG",
            "value 'WARN\\nINFO' holds a control character (U+000A); accepted: one line of printable text",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    sriov: {vfs_per_nic: 8}\n",
            "profiles.gcp/a3-megagpu-8g.sriov",
            "tiers.best.roles does not name sriov",
        ),
        (
            "profiles:\n  baremetal/hgx-h100-ib-ndr:\n    tiers: {best: {roles: [fabric_facts, infiniband, sriov]}}\n",
            "profiles.baremetal/hgx-h100-ib-ndr.tiers.best.roles",
            "names sriov, but the profile has no sriov: section",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    sriov: {vfs_per_nic: 8}\n"
            "    tiers: {best: {roles: [fabric_facts, gcp_tcpxo, sriov]}}\n",
            "profiles.gcp/a3-megagpu-8g.sriov",
            "nics.gpu.kind 'gvnic' cannot carve virtual functions here; accepted: connectx_ib, connectx_roce",
        ),
        (
            "profiles:\n  baremetal/hgx-h100-ib-ndr-sriov:\n    sriov: {vfs_per_nic: 0}\n",
            "profiles.baremetal/hgx-h100-ib-ndr-sriov.sriov.vfs_per_nic",
            "must be an integer >= 1",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    host_tuning: {iommu: passthrough, source: x}\n",
            "profiles.gcp/a3-megagpu-8g.host_tuning",
            "tiers.best.roles does not name host_tuning",
        ),
        (
            "profiles:\n  baremetal/hgx-h100-ib-ndr:\n    host_tuning: {acs: off, source: x}\n",
            "profiles.baremetal/hgx-h100-ib-ndr.host_tuning.acs",
            "'off' is not accepted; accepted: disabled",  # YAML 1.2 core: text, as written
        ),
        (
            "profiles:\n  baremetal/hgx-h100-ib-ndr:\n    host_tuning: {cpu_governor: 'Turbo Boost', source: x}\n",
            "profiles.baremetal/hgx-h100-ib-ndr.host_tuning.cpu_governor",
            "must be a cpufreq governor name such as 'performance'",
        ),
        (
            "profiles:\n  gcp/a3-ultragpu-8g:\n    host_tuning: {iommu: passthrough}\n",
            "profiles.gcp/a3-ultragpu-8g.host_tuning.source",
            "missing required key",
        ),
        (
            "profiles:\n  aws/p5.48xlarge:\n    host_tuning: {nic_pci_write_ordering: per_mkey, source: x}\n"
            "    tiers: {best: {roles: [fabric_facts, host_tuning, aws_efa]}}\n",
            "profiles.aws/p5.48xlarge.host_tuning.nic_pci_write_ordering",
            "is ConnectX firmware (mstconfig), but nics.gpu.kind is 'efa'",
        ),
        # Issue 41: no interface names in the catalog; env values name NICs through placeholders the host fills.
        (
            "profiles:\n  gcp/a3-ultragpu-8g:\n    interface_naming: {net_ifnames_0: {enp0s19: eth0}}\n",
            "profiles.gcp/a3-ultragpu-8g.interface_naming",
            "unknown key",
        ),
        (
            "profiles:\n  gcp/a3-ultragpu-8g:\n    nics: {management: {interface: enp0s9}}\n",
            "profiles.gcp/a3-ultragpu-8g.nics.management.interface",
            "unknown key; accepted: kind, count, speed_gbit_s",
        ),
        (
            "profiles:\n  gcp/a3-highgpu-8g:\n    tiers: {best: {env: {X_NIC: '{nics.gpu[4]}'}}}\n",
            "profiles.gcp/a3-highgpu-8g.tiers.best.env.X_NIC",
            "placeholder {nics.gpu[4]}: nics.gpu has 4 NICs (count)",
        ),
        (
            "profiles:\n  gcp/a3-highgpu-8g:\n    tiers: {best: {env: {X_NIC: '{nics.rdma}'}}}\n",
            "profiles.gcp/a3-highgpu-8g.tiers.best.env.X_NIC",
            "placeholder {nics.rdma} is not accepted; accepted: {nics.gpu}, {nics.gpu[N]}",
        ),
        (
            "profiles:\n  aws/p5.48xlarge:\n    tiers: {best: {env: {X_NIC: '{nics.gpu}'}}}\n",
            "profiles.aws/p5.48xlarge.tiers.best.env.X_NIC",
            "placeholder {nics.gpu}: efa NICs have no interface names",
        ),
        (
            "profiles:\n  baremetal/hgx-h100-ib-ndr:\n"
            "    tiers: {standard: {env: {NCCL_SOCKET_IFNAME: '{nics.management}'}}}\n",
            "profiles.baremetal/hgx-h100-ib-ndr.tiers.standard.env.NCCL_SOCKET_IFNAME",
            "a management NIC of kind 'ethernet' is found by no identity; accepted: kind gvnic, ena, vnic, accelnet",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n"
            "    tiers: {best: {k8s_env: {NCCL_SOCKET_IFNAME: '{nics.management}'}}}\n",
            "profiles.gcp/a3-megagpu-8g.tiers.best.k8s_env.NCCL_SOCKET_IFNAME",
            "names host NICs; accepted: the pod's interface names, or null to unset",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    nvlink: {domain_gpus: 12, source: x}\n",
            "profiles.gcp/a3-megagpu-8g.nvlink.domain_gpus",
            "12 is not a multiple of gpu.count 8 above it; accepted: the GPUs of two or more whole hosts",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n"
            "    nvlink: {domain_gpus: 16, source: x, thresholds: [{collective: all_reduce}]}\n",
            "profiles.gcp/a3-megagpu-8g.nvlink.thresholds[0].min_nodes",
            "missing required key",
        ),
        (
            "profiles:\n  gcp/a3-megagpu-8g:\n    architecture: aarch64\n",
            "profiles.gcp/a3-megagpu-8g.architecture",
            "'aarch64' is not accepted; accepted: amd64, arm64",
        ),
        ("profiles: [1, 2]\n", "profiles", "'profiles:' mapping"),
        ("profiles: {}\nextra: 1\n", "extra", "unknown top-level key"),
        ("profiles:\n  gcp/a3-megagpu-8g: {tiers: [\n", "line 3, column 1", "not valid YAML"),
    ],
)
def test_bad_override_names_file_key_and_reason(tmp_path, text, key, reason):
    override = write(tmp_path, text)
    with pytest.raises(CatalogError) as caught:
        fabric_catalog.load_catalog([override])
    assert caught.value.source == str(override)
    assert caught.value.key == key
    assert reason in caught.value.reason
    assert str(override) in str(caught.value)


def test_missing_override_file_is_one_clear_error(tmp_path):
    with pytest.raises(CatalogError, match="cannot read file"):
        fabric_catalog.load_catalog([tmp_path / "absent.yml"])


def test_builtin_directory_without_files_is_an_error(tmp_path):
    with pytest.raises(CatalogError, match="no catalog files"):
        fabric_catalog.load_catalog([], builtin_dir=tmp_path)


def test_duplicate_profile_across_builtin_files_is_an_error(tmp_path):
    body = (fabric_catalog.BUILTIN_CATALOG_DIR / "gcp.yml").read_text(encoding="utf-8")
    write(tmp_path, body, "a.yml")
    write(tmp_path, body, "b.yml")
    with pytest.raises(CatalogError, match="already defined in"):
        fabric_catalog.load_catalog([], builtin_dir=tmp_path)


def test_threshold_node_range_is_checked(tmp_path):
    override = write(
        tmp_path,
        """
profiles:
  aws/p5.48xlarge:
    bandwidth:
      thresholds:
        - {collective: all_reduce, min_nodes: 4, max_nodes: 2, algo: ring, min_size_bytes: 1,
           min_busbw_gbyte_s: 1, verified: false, basis: x}
""",
    )
    with pytest.raises(CatalogError) as caught:
        fabric_catalog.load_catalog([override])
    assert caught.value.key == "profiles.aws/p5.48xlarge.bandwidth.thresholds[0].max_nodes"


# --- Values that reach files on hosts: one grammar, checked at load time ---------------------------------------

MEGA = "profiles:\n  gcp/a3-megagpu-8g:\n"


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        pytest.param(
            MEGA + '    tiers: {best: {env: {"NCCL_DEBUG\\nFOO": WARN}}}\n',
            "profiles.gcp/a3-megagpu-8g.tiers.best.env",
            "key 'NCCL_DEBUG\\nFOO' holds a control character (U+000A)",
            id="env-key-newline",
        ),
        pytest.param(
            MEGA + '    tiers: {best: {env: {NCCL_DEBUG: "WARN\\e[31m"}}}\n',
            "profiles.gcp/a3-megagpu-8g.tiers.best.env.NCCL_DEBUG",
            "value 'WARN\\x1b[31m' holds a control character (U+001B); accepted: one line of printable text",
            id="env-value-escape",
        ),
        pytest.param(
            MEGA + '    tiers: {best: {env: {"nccl-debug": WARN}}}\n',
            "profiles.gcp/a3-megagpu-8g.tiers.best.env",
            "variable name 'nccl-debug' must match ^[A-Z_][A-Z0-9_]*$",
            id="env-key-grammar",
        ),
        pytest.param(
            MEGA + "    tiers: {best: {env: {NCCL_DEBUG: " + "x" * 1024 + "}}}\n",
            "profiles.gcp/a3-megagpu-8g.tiers.best.env",
            "NCCL_DEBUG value is longer than 1023 bytes, the most /etc/nccl.conf holds",
            id="env-value-too-long",
        ),
        pytest.param(
            MEGA + '    tiers: {standard: {k8s_env: {LD_LIBRARY_PATH: "/lib\\r"}}}\n',
            "profiles.gcp/a3-megagpu-8g.tiers.standard.k8s_env.LD_LIBRARY_PATH",
            "holds a control character (U+000D)",
            id="k8s-env-value-cr",
        ),
        pytest.param(
            MEGA + '    description: "8x H100 \\u202eevil"\n',
            "profiles.gcp/a3-megagpu-8g.description",
            "holds RIGHT-TO-LEFT OVERRIDE (U+202E)",
            id="description-bidi-override",
        ),
        pytest.param(
            MEGA + '    sources: [ok, "two\\u2028lines"]\n',
            "profiles.gcp/a3-megagpu-8g.sources[1]",
            "holds LINE SEPARATOR (U+2028)",
            id="source-line-separator",
        ),
        pytest.param(
            "profiles:\n  gcp/a3;reboot: {}\n",
            "profiles.gcp/a3;reboot",
            "is not a profile name; accepted: '<cloud>/<instance-type>'",
            id="profile-name-semicolon",
        ),
        pytest.param(
            'profiles:\n  "gcp/a3\\nx": {}\n',
            "profiles.'gcp/a3\\nx'",
            "is not a profile name",
            id="profile-name-newline",
        ),
        pytest.param(
            "profiles:\n  GCP/a3: {}\n",
            "profiles.GCP/a3",
            "a lowercase cloud",
            id="profile-name-uppercase-cloud",
        ),
        pytest.param("profiles:\n  7: {}\n", "profiles.7", "is not a profile name", id="profile-name-number"),
        pytest.param(
            "profiles:\n  gcp/x$(id):\n    cloud: gcp\n    instance_type: x$(id)\n",
            "profiles.gcp/x$(id)",
            "is not a profile name",
            id="profile-name-command",
        ),
        pytest.param(
            MEGA + '    instance_type: "a3 megagpu"\n',
            "profiles.gcp/a3-megagpu-8g.instance_type",
            "'a3 megagpu' is not accepted; accepted: 1-64 letters, digits",
            id="instance-type-space",
        ),
        pytest.param(
            MEGA + "    nics: {gpu: {interfaces: [eth1, 'eth2;reboot']}}\n",
            "profiles.gcp/a3-megagpu-8g.nics.gpu.interfaces",
            "unknown key; accepted: count, speed_gbit_s, kind, mtu, pci_ids, rdma_devices",
            id="interfaces-are-no-catalog-key",
        ),
        pytest.param(
            MEGA + "    nics: {management: {count: 0}}\n",
            "profiles.gcp/a3-megagpu-8g.nics.management.count",
            "must be an integer >= 1",
            id="management-count-zero",
        ),
        pytest.param(
            MEGA + "    nics: {gpu: {rdma_devices: ['mlx5_*']}}\n",
            "profiles.gcp/a3-megagpu-8g.nics.gpu.rdma_devices",
            "accepted: an RDMA device name",
            id="rdma-device-glob",
        ),
        pytest.param("profiles: {}\n1: x\nb: y\n", "1", "unknown top-level key", id="top-level-number-key"),
        pytest.param('profiles: {}\n"a\\tb": 1\n', "'a\\tb'", "unknown top-level key", id="top-level-key-with-tab"),
    ],
)
def test_values_that_reach_hosts_follow_the_grammar(tmp_path, text, key, reason):
    error = override_error(tmp_path, text)
    assert error.key == key
    assert reason in error.reason


def override_error(tmp_path: Path, text: str) -> CatalogError:
    """The CatalogError of an override file holding ``text``: it names that file, in one line whatever the value
    holds."""
    override = write(tmp_path, text)
    with pytest.raises(CatalogError) as caught:
        fabric_catalog.load_catalog([override])
    assert caught.value.source == str(override)
    assert "\n" not in str(caught.value)
    return caught.value


def test_builtin_catalog_follows_the_grammar(builtin):
    """Every shipped name is one a host file can hold as is."""
    for name, profile in builtin.profiles.items():
        assert fabric_catalog.PROFILE_NAME.match(name)
        gpu = profile["nics"]["gpu"]
        assert all(fabric_catalog.NETDEV.match(nic) for nic in gpu.get("interfaces", []))
        assert all(fabric_catalog.RDMA_DEVICE.match(device) for device in gpu.get("rdma_devices", []))


@pytest.mark.parametrize(
    ("content", "where", "reason"),
    [
        pytest.param(b"profiles:\n  x: \xff\n", "line 2, column 6", "not UTF-8: byte 0xff", id="not-utf8"),
        pytest.param(b"profiles: {}\0\n", "line 1, column 13", "control character U+0000", id="nul"),
        pytest.param(
            b"profiles: " + b"[" * 70 + b"]" * 70 + b"\n", "line 1, column 74", "nested deeper than 64", id="deep"
        ),
        pytest.param(
            b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + b"".join(b"%c: &%c [%s]\n" % (n, n, b", ".join([b"*" + bytes([n - 1])] * 10)) for n in b"bcdefghij")
            + b"profiles: {}\n",
            "line 6",
            "nodes with aliases expanded (an alias bomb?)",
            id="alias-bomb",
        ),
    ],
)
def test_yaml_level_faults_are_catalog_errors(tmp_path, content, where, reason):
    override = tmp_path / "override.yml"
    override.write_bytes(content)
    with pytest.raises(CatalogError) as caught:
        fabric_catalog.load_catalog([override])
    assert caught.value.source == str(override)
    assert caught.value.key.startswith(where)
    assert reason in caught.value.reason


# --- The fabrics table: inheritance, provenance, and the fabric's rules at load time --------------------------------

P5 = "profiles:\n  aws/p5.48xlarge:\n"
SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "catalog_resolved_b113656.json"


REMOVED = object()
# Issue 18 scope 5, catalog values that were wrong on real images (sources next to each value in catalog/*.yml):
# Google's images name NICs by PCI path, a3-mega's LLCM directory, Google's current TCPX release, Oracle's rails,
# settings and floor for BM.GPU.H100.8, Azure's nccl.conf keys. Every other resolved value is as at b113656.
# (profile, dotted key path, value); REMOVED drops the key; a new key comes last, as the loader puts it.
# TCPX's CPU bindings per GPU NIC in PCI order: the first two NICs on NUMA node 0, the other two on node 1.
TCPX_TX = "{0}:8-21,112-125;{1}:8-21,112-125;{2}:60-73,164-177;{3}:60-73,164-177"
TCPX_RX = "{0}:22-35,126-139;{1}:22-35,126-139;{2}:74-87,178-191;{3}:74-87,178-191"
GPU_PLACEHOLDERS = [f"{{nics.gpu[{index}]}}" for index in range(4)]
CHANGED_SINCE_B113656 = [
    (
        "gcp/a3-highgpu-8g",
        "bandwidth.thresholds",
        [
            {
                "collective": "all_reduce",
                "min_nodes": 2,
                "max_nodes": 2,
                "algo": "default",
                "min_size_bytes": 268435456,
                "min_busbw_gbyte_s": 58,
                "verified": True,
                "basis": (
                    "65-67 GB/s plateau 256 MB-2 GB, 2 nodes (SkyPilot, measured with NCCL_ALGO=Ring; the env now "
                    "follows Google's current Ring,Tree, which may choose Tree on 2 nodes: recalibrate if so); "
                    "below 25 GB/s means TCPX is off"
                ),
            }
        ],
    ),
    ("azure/Standard_ND96isr_H100_v5", "tiers.best.env.NCCL_IB_PCI_RELAXED_ORDERING", "1"),
    ("azure/Standard_ND96isr_H100_v5", "tiers.best.env.NCCL_IGNORE_CPU_AFFINITY", "1"),
    ("azure/Standard_ND96isr_H200_v5", "tiers.best.env.NCCL_IB_PCI_RELAXED_ORDERING", "1"),
    ("azure/Standard_ND96isr_H200_v5", "tiers.best.env.NCCL_IGNORE_CPU_AFFINITY", "1"),
    ("gcp/a3-highgpu-8g", "tiers.best.env.NCCL_ALGO", "Ring,Tree"),
    ("gcp/a3-highgpu-8g", "tiers.best.env.NCCL_BUFFSIZE", "4194304"),
    ("gcp/a3-highgpu-8g", "tiers.best.env.NCCL_MIN_NCHANNELS", REMOVED),
    ("gcp/a3-highgpu-8g", "tiers.best.env.NCCL_MAX_NCHANNELS", REMOVED),
    ("gcp/a3-highgpu-8g", "tiers.best.k8s_env.NCCL_BUFFSIZE", REMOVED),
    ("gcp/a3-edgegpu-8g", "tiers.best.env.NCCL_ALGO", "Ring,Tree"),
    ("gcp/a3-edgegpu-8g", "tiers.best.env.NCCL_BUFFSIZE", "4194304"),
    ("gcp/a3-edgegpu-8g", "tiers.best.env.NCCL_MIN_NCHANNELS", REMOVED),
    ("gcp/a3-edgegpu-8g", "tiers.best.env.NCCL_MAX_NCHANNELS", REMOVED),
    ("gcp/a3-edgegpu-8g", "tiers.best.k8s_env.NCCL_BUFFSIZE", REMOVED),
    # Issue 41: no interface names in the catalog (each image gives its own); env values name NICs by placeholder.
    *[
        (name, path, REMOVED)
        for name in ("gcp/a3-highgpu-8g", "gcp/a3-edgegpu-8g", "gcp/a3-megagpu-8g")
        for path in ("nics.gpu.interfaces", "nics.management.interface")
    ],
    # Azure's RDMA devices by identity: mlx5_ib<N> is the ubuntu-hpc images' naming (azhpc-images persistent RDMA
    # naming), the kernel's mlx5_<N> elsewhere; the host's names fill the placeholders.
    *[
        (name, path, value)
        for name in ("azure/Standard_ND96isr_H100_v5", "azure/Standard_ND96isr_H200_v5")
        for path, value in (
            ("nics.gpu.rdma_devices", REMOVED),
            ("tiers.best.env.NCCL_IB_HCA", "={nics.gpu_rdma}"),
            ("tiers.best.env.UCX_NET_DEVICES", "{nics.gpu_rdma:1}"),
        )
    ],
    # Azure's synthetic NIC by identity (the default route's interface): the ubuntu-hpc images name it eth0.
    ("azure/Standard_ND96isr_H100_v5", "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    ("azure/Standard_ND96isr_H200_v5", "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    *[
        (name, f"tiers.best.env.{key}", value)
        for name in ("gcp/a3-highgpu-8g", "gcp/a3-edgegpu-8g")
        for key, value in (
            ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "{nics.gpu}"),
            ("NCCL_GPUDIRECTTCPX_CTRL_DEV", "{nics.management}"),
            ("NCCL_GPUDIRECTTCPX_TX_BINDINGS", TCPX_TX.format(*GPU_PLACEHOLDERS)),
            ("NCCL_GPUDIRECTTCPX_RX_BINDINGS", TCPX_RX.format(*GPU_PLACEHOLDERS)),
            ("NCCL_SOCKET_IFNAME", "{nics.management}"),
        )
    ],
    *[
        (name, f"tiers.best.k8s_env.{key}", value)
        for name in ("gcp/a3-highgpu-8g", "gcp/a3-edgegpu-8g")
        for key, value in (
            ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "eth1,eth2,eth3,eth4"),
            ("NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"),
            ("NCCL_GPUDIRECTTCPX_TX_BINDINGS", TCPX_TX.format("eth1", "eth2", "eth3", "eth4")),
            ("NCCL_GPUDIRECTTCPX_RX_BINDINGS", TCPX_RX.format("eth1", "eth2", "eth3", "eth4")),
            ("NCCL_SOCKET_IFNAME", "eth0"),
        )
    ],
    ("gcp/a3-highgpu-8g", "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    ("gcp/a3-edgegpu-8g", "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    ("gcp/a3-megagpu-8g", "tiers.best.env.NCCL_FASTRAK_CTRL_DEV", "{nics.management}"),
    ("gcp/a3-megagpu-8g", "tiers.best.env.NCCL_FASTRAK_IFNAME", "{nics.gpu}"),
    ("gcp/a3-megagpu-8g", "tiers.best.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    ("gcp/a3-megagpu-8g", "tiers.best.env.NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"),
    ("gcp/a3-megagpu-8g", "tiers.best.k8s_env.NCCL_FASTRAK_CTRL_DEV", "eth0"),
    ("gcp/a3-megagpu-8g", "tiers.best.k8s_env.NCCL_FASTRAK_IFNAME", "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"),
    ("gcp/a3-megagpu-8g", "tiers.best.k8s_env.NCCL_SOCKET_IFNAME", "eth0"),
    ("gcp/a3-megagpu-8g", "tiers.best.k8s_env.NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", None),
    ("gcp/a3-megagpu-8g", "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    *[
        change
        for name in ("gcp/a3-ultragpu-8g", "gcp/a4-highgpu-8g")
        for change in (
            (name, "nics.management.interface", REMOVED),
            (name, "nics.management.count", 2),
            (name, "tiers.best.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
            (name, "tiers.best.k8s_env.NCCL_SOCKET_IFNAME", None),
            (name, "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
        )
    ],
    *[
        (name, path, REMOVED)
        for name in ("azure/Standard_ND96isr_H100_v5", "azure/Standard_ND96isr_H200_v5")
        for path in ("nics.gpu.interfaces", "nics.management.interface")
    ],
    # Azure's synthetic NIC by identity (the default route's interface): the ubuntu-hpc images name it eth0.
    ("azure/Standard_ND96isr_H100_v5", "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    ("azure/Standard_ND96isr_H200_v5", "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    ("oci/BM.GPU.H100.8", "nics.management.interface", REMOVED),
    # OCI's primary VNIC by identity (the default route's interface): Oracle's images name it eth0, others not.
    ("oci/BM.GPU.H100.8", "tiers.best.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    ("oci/BM.GPU.H100.8", "tiers.standard.env.NCCL_SOCKET_IFNAME", "{nics.management}"),
    (
        "oci/BM.GPU.H100.8",
        "nics.gpu.rdma_devices",
        [
            "mlx5_0",
            "mlx5_1",
            "mlx5_3",
            "mlx5_4",
            "mlx5_5",
            "mlx5_6",
            "mlx5_7",
            "mlx5_8",
            "mlx5_9",
            "mlx5_10",
            "mlx5_12",
            "mlx5_13",
            "mlx5_14",
            "mlx5_15",
            "mlx5_16",
            "mlx5_17",
        ],
    ),
    (
        "oci/BM.GPU.H100.8",
        "tiers.best.env.NCCL_IB_HCA",
        "=mlx5_0,mlx5_1,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9,mlx5_10,mlx5_12,mlx5_13,mlx5_14,mlx5_15,mlx5_16,mlx5_17",
    ),
    ("oci/BM.GPU.H100.8", "tiers.best.env.NCCL_IB_SPLIT_DATA_ON_QPS", "0"),
    ("oci/BM.GPU.H100.8", "tiers.best.env.NCCL_IB_QPS_PER_CONNECTION", "1"),
    ("oci/BM.GPU.H100.8", "tiers.best.env.NCCL_IB_TIMEOUT", "22"),
    ("oci/BM.GPU.H100.8", "tiers.best.env.NCCL_IGNORE_CPU_AFFINITY", "1"),
    (
        "oci/BM.GPU.H100.8",
        "bandwidth.thresholds",
        [
            {
                "collective": "all_reduce",
                "min_nodes": 2,
                "max_nodes": 2,
                "algo": "default",
                "min_size_bytes": 8589934592,
                "min_busbw_gbyte_s": 440,
                "verified": True,
                "basis": (
                    "Oracle's multi-node health check fails BM.GPU.H100.8 below 440 GB/s 'Avg bus bandwidth' of "
                    "all_reduce_perf -b 1G -e 16G on 2 nodes x 8 GPUs with its nccl.conf settings (oci-hpc "
                    "playbooks/roles/healthchecks/files/multi_node_active_healthcheck.py, threshold 440); held "
                    "here at 8 GB and up"
                ),
            },
            {
                "collective": "all_reduce",
                "min_nodes": 2,
                "algo": "ring",
                "min_size_bytes": 1073741824,
                "min_busbw_gbyte_s": 340,
                "verified": False,
                "basis": "derived: 0.85 x line rate (400 GB/s); UNVERIFIED, calibrate per site",
            },
        ],
    ),
]
PROSE_CHANGED_SINCE_B113656 = {
    ("aws/p6-b200.48xlarge", "sources"),
    ("baremetal/hgx-h100-ib-ndr", "sources"),
    ("baremetal/hgx-h100-ib-ndr-sriov", "sources"),
    ("nebius/gpu-b200-sxm", "sources"),
    ("azure/Standard_ND96isr_H100_v5", "sources"),
    ("azure/Standard_ND96isr_H200_v5", "sources"),
    ("gcp/a3-megagpu-8g", "description"),
    ("gcp/a3-highgpu-8g", "description"),
    ("gcp/a3-edgegpu-8g", "description"),
    ("gcp/a3-megagpu-8g", "sources"),
    ("gcp/a3-ultragpu-8g", "sources"),
    ("gcp/a4-highgpu-8g", "sources"),
    ("oci/BM.GPU.H100.8", "description"),
    ("oci/BM.GPU.H100.8", "sources"),
}


def _as_changed_since_b113656(snapshot: dict, current: dict) -> dict:
    for profile, path, value in CHANGED_SINCE_B113656:
        *parents, key = path.split(".")
        node = snapshot[profile]
        for parent in parents:
            node = node[parent]
        if value is REMOVED:
            del node[key]
        else:
            node[key] = value
    for profile, key in PROSE_CHANGED_SINCE_B113656:  # descriptions and source notes: prose, taken as they are now
        snapshot[profile][key] = current[profile][key]
    # Issue 21: NCCL itself, pinned per fabric (section nccl, held to its own tests in test_nccl_logic.py), and the
    # role that installs it, run before nccl_env in every tier.
    for name, profile in snapshot.items():
        profile["nccl"] = current[name]["nccl"]
        for tier in profile["tiers"].values():
            tier["roles"] = [role for old in tier["roles"] for role in (["nccl", old] if old == "nccl_env" else [old])]
    # Issue 21: bare-metal host tuning (section host_tuning, held to its own tests below), its role right after
    # fabric_facts in the best tier of the profiles that declare it.
    for name, profile in snapshot.items():
        if "host_tuning" in current[name]:
            profile["host_tuning"] = current[name]["host_tuning"]
            best = profile["tiers"]["best"]["roles"]
            best.insert(best.index("fabric_facts") + 1, "host_tuning")
    # Issue 45: storage NICs (section storage, held to its own tests in test_gds_logic.py) where a source says so.
    for name, profile in snapshot.items():
        if "storage" in current[name]:
            profile["storage"] = current[name]["storage"]
    # A new section (interface_naming) sits where the schema puts it; only env order reaches a host file.
    return {name: {key: profile[key] for key in current[name]} for name, profile in snapshot.items()}


def test_resolved_profiles_are_those_of_b113656(builtin):
    """The fabrics table moved what follows from the fabric out of the profiles: nothing downstream changed,
    but for the values issue 18 corrected on purpose (CHANGED_SINCE_B113656).

    The snapshot was written by load_catalog at b113656, before `fabrics:` existed; key order counts too
    (nccl.conf and profile.d are written in env order).
    """
    current = json.loads(json.dumps(builtin.profiles))
    expected = _as_changed_since_b113656(json.loads(SNAPSHOT.read_text(encoding="utf-8")), current)
    # Profiles added since (rack-scale NVLink) are held to the schema and their own tests, not to the snapshot.
    resolved = json.dumps({name: builtin.profiles[name] for name in expected}, indent=1, ensure_ascii=False) + "\n"
    assert resolved == json.dumps(expected, indent=1, ensure_ascii=False) + "\n"


def test_every_builtin_profile_has_its_fabric_in_the_table(builtin):
    fabrics_file = str(fabric_catalog.BUILTIN_CATALOG_DIR / "fabrics.yml")
    for name, profile in builtin.profiles.items():
        fabric = profile["fabric"]
        assert fabric in builtin.fabrics, name
        roles_from = ("fabric", fabrics_file, fabric)
        if profile["tiers"]["best"]["roles"] != builtin.fabrics[fabric]["tiers"]["best"]["roles"]:
            roles_from = ("profile", builtin.origins[name], "")  # the SR-IOV profile adds sriov
        assert builtin.provenance[name]["tiers.best.roles"] == roles_from, name
        assert builtin.provenance[name]["cloud"] == ("profile", builtin.origins[name], ""), name


def test_provenance_names_fabric_profile_and_override(tmp_path):
    override = write(
        tmp_path,
        """
fabrics:
  efa:
    tiers: {best: {env: {FI_EFA_FORK_SAFE: "1"}}}
profiles:
  aws/p5.48xlarge:
    tiers: {best: {env: {NCCL_DEBUG: INFO}}}
""",
    )
    catalog = fabric_catalog.load_catalog([override])
    origins = catalog.provenance["aws/p5.48xlarge"]
    assert origins["tiers.best.env.FI_PROVIDER"][0] == "fabric"
    assert origins["tiers.best.env.FI_EFA_FORK_SAFE"] == ("override", str(override), "efa")
    assert origins["tiers.best.env.NCCL_DEBUG"] == ("override", str(override), "")
    assert origins["nics.gpu.count"][0] == "profile"
    # A fabric override reaches every profile of the fabric, and only those.
    for name, profile in catalog.profiles.items():
        assert ("FI_EFA_FORK_SAFE" in profile["tiers"]["best"]["env"]) == (profile["fabric"] == "efa"), name


def test_profile_env_merges_key_by_key_and_roles_replace(tmp_path):
    override = write(
        tmp_path,
        """
profiles:
  baremetal/lab-roce:
    cloud: baremetal
    instance_type: lab-roce
    description: a RoCE lab node that spells out only what differs from its fabric
    gpu: {model: L4, count: 1, nvswitch: false}
    nics:
      gpu: {count: 1, speed_gbit_s: 100, kind: connectx_roce}
      management: {kind: ethernet}
    fabric: roce
    tiers:
      best:
        roles: [fabric_facts, rdma_stack, nvidia_driver, roce, nccl_env]
        env: {NCCL_IB_GID_INDEX: null, NCCL_IB_TC: "106"}
    bandwidth:
      line_rate_gbit_s: 100
      source: site
      thresholds:
        - {collective: all_reduce, min_nodes: 2, algo: ring, min_size_bytes: 1, min_busbw_gbyte_s: 1, verified: false,
           basis: guess}
""",
    )
    profile = fabric_catalog.load_catalog([override]).get("baremetal/lab-roce")
    assert profile["tiers"]["best"]["roles"] == ["fabric_facts", "rdma_stack", "nvidia_driver", "roce", "nccl_env"]
    assert profile["tiers"]["best"]["env"] == {"NCCL_IB_HCA": "mlx5", "NCCL_IB_TC": "106"}  # null removed GID index
    assert profile["tiers"]["standard"]["env"]["NCCL_NET"] == "Socket"


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        pytest.param(
            P5 + "    tiers: {best: {roles: [fabric_facts, nvidia_driver, gcp_tcpxo]}}\n",
            "profiles.aws/p5.48xlarge.tiers.best.roles",
            "names gcp_tcpxo, the role of fabric tcpxo; a profile of fabric efa cannot run it",
            id="efa-runs-tcpxo-role",
        ),
        pytest.param(
            P5 + "    tiers: {standard: {roles: [nvidia_driver, infiniband, nccl_env]}}\n",
            "profiles.aws/p5.48xlarge.tiers.standard.roles",
            "names infiniband, the role of fabric infiniband",
            id="standard-tier-runs-foreign-role",
        ),
        pytest.param(
            P5 + "    tiers: {best: {roles: [nccl_env, fabric_facts, nvidia_driver, aws_efa]}}\n",
            "profiles.aws/p5.48xlarge.tiers.best.roles",
            "names nccl_env, fabric_facts, nvidia_driver, aws_efa in another order; fabric efa runs fabric_facts, "
            "nvidia_driver, aws_efa, nccl, nccl_env, nccl_tests in this order",
            id="roles-out-of-order",
        ),
        pytest.param(
            "profiles:\n  nebius/gpu-h100-sxm:\n    tiers: {best: {roles: [fabric_facts, infiniband, rdma_stack]}}\n",
            "profiles.nebius/gpu-h100-sxm.tiers.best.roles",
            "names fabric_facts, infiniband, rdma_stack in another order; fabric infiniband runs fabric_facts, "
            "rdma_stack, nvidia_driver, infiniband, nccl, nccl_env, nccl_tests in this order",
            id="fabric-role-before-its-rdma-stack",
        ),
        pytest.param(
            P5 + "    tiers: {best: {env: {FI_PROVIDER: tcp}}}\n",
            "profiles.aws/p5.48xlarge.tiers.best.env.FI_PROVIDER",
            "FI_PROVIDER 'tcp' is not accepted by fabric efa; accepted: efa",
            id="efa-provider-value",
        ),
        pytest.param(
            P5 + "    tiers: {best: {env: {FI_PROVIDER: null}}}\n",
            "profiles.aws/p5.48xlarge.tiers.best.env",
            "lacks FI_PROVIDER, which fabric efa requires",
            id="efa-provider-removed",
        ),
        pytest.param(
            "profiles:\n  nebius/gpu-h100-sxm:\n    tiers: {best: {env: {NCCL_IB_DISABLE: '1'}}}\n",
            "profiles.nebius/gpu-h100-sxm.tiers.best.env.NCCL_IB_DISABLE",
            "NCCL_IB_DISABLE is set ('1'); fabric infiniband forbids it: NCCL_IB_DISABLE=1 turns off",
            id="infiniband-ib-disabled",
        ),
        pytest.param(
            "profiles:\n  nebius/gpu-h100-sxm:\n    tiers: {best: {env: {NCCL_IB_HCA: 'mlx5_0:x'}}}\n",
            "profiles.nebius/gpu-h100-sxm.tiers.best.env",
            "nebius/gpu-h100-sxm: NCCL_IB_HCA=mlx5_0:x: entry 'mlx5_0:x' has port 'x', which is not a port number",
            id="infiniband-hca-typo",
        ),
        pytest.param(
            "profiles:\n  oci/BM.GPU.H100.8:\n    tiers: {best: {env: {NCCL_IB_TC: '4l'}}}\n",
            "profiles.oci/BM.GPU.H100.8.tiers.best.env",
            "oci/BM.GPU.H100.8: the catalog's NCCL_IB_TC is '4l'; accepted: an integer from 0 to 255",
            id="roce-traffic-class",
        ),
        pytest.param(
            "profiles:\n  gcp/a3-megagpu-8g:\n    tiers: {best: {env: {NCCL_NVLSTREE_MAX_CHUNKSIZE: null}}}\n",
            "profiles.gcp/a3-megagpu-8g.tiers.best.env",
            "the catalog env of gcp/a3-megagpu-8g lacks NCCL_NVLSTREE_MAX_CHUNKSIZE: with NCCL_NVLS_ENABLE=1 Google's "
            "guest-config checker (plugin v1.0.12 and later) aborts every NCCL job unless it is 131072",
            id="tcpxo-guest-config-chunksize",
        ),
        pytest.param(
            "profiles:\n  gcp/a3-megagpu-8g:\n    tiers: {best: {env: {NCCL_PROTO: Simple}}}\n",
            "profiles.gcp/a3-megagpu-8g.tiers.best.env",
            "has NCCL_PROTO=Simple; the default guest config expects NCCL_PROTO=Simple,LL128",
            id="tcpxo-guest-config-proto",
        ),
        pytest.param(
            "profiles:\n  gcp/a4-highgpu-8g:\n    tiers: {best: {env: {LD_LIBRARY_PATH: null}}}\n",
            "profiles.gcp/a4-highgpu-8g.tiers.best.env",
            "the catalog environment of 'gcp/a4-highgpu-8g' has no LD_LIBRARY_PATH; it must name the directory of "
            "the gIB plugin",
            id="gib-library-path",
        ),
        pytest.param(
            "fabrics:\n  efa:\n    tiers: {best: {env: {FI_PROVIDER: tcp}}}\n",
            "profiles.aws/p4d.24xlarge.tiers.best.env.FI_PROVIDER",
            "FI_PROVIDER 'tcp' is not accepted by fabric efa",
            id="fabric-override-breaks-its-rule",
        ),
        pytest.param(
            "fabrics:\n  efa:\n    tiers: {best: {roles: [fabric_facts, warp_drive]}}\n",
            "fabrics.efa.tiers.best.roles",
            "item 1 ('warp_drive') 'warp_drive' is not accepted",
            id="fabric-unknown-role",
        ),
        pytest.param(
            "fabrics:\n  efa:\n    env_rules: {checks: [aws_magic]}\n",
            "fabrics.efa.env_rules.checks",
            "'aws_magic' is not accepted; accepted: gcp_tcpxo, gcp_gpudirect_rdma, infiniband, roce",
            id="fabric-unknown-check",
        ),
        pytest.param(
            "fabrics:\n  warp: {}\n",
            "fabrics.warp",
            "is not a fabric; accepted: tcpx, tcpxo",
            id="fabric-unknown-name",
        ),
        pytest.param(
            "fabrics:\n  roce:\n    env_rules: {forbid: {NCCL_IB_DISABLE: ''}}\n",
            "fabrics.roce.env_rules.forbid",
            "NCCL_IB_DISABLE must say why the fabric forbids it",
            id="fabric-forbid-without-reason",
        ),
    ],
)
def test_fabric_rules_refuse_at_load_time(tmp_path, text, key, reason):
    override = write(tmp_path, text)
    with pytest.raises(CatalogError) as caught:
        fabric_catalog.load_catalog([override])
    assert (caught.value.source, caught.value.key) == (str(override), key)
    assert reason in caught.value.reason
    assert "\n" not in str(caught.value)


def test_role_and_catalog_share_one_env_rule():
    """The loader calls the role's own functions: a rule changes in one place."""
    roce = module_utils("roce")
    env = {"NCCL_IB_TC": "300"}
    from_role = roce.plan({}, {"env": env}, {})["errors"]
    assert any("the catalog's NCCL_IB_TC is '300'" in error for error in from_role)
    assert roce.env_errors(env, "p") == ["p: the catalog's NCCL_IB_TC is '300'; accepted: an integer from 0 to 255"]


def test_every_named_env_check_has_its_function():
    assert sorted(fabric_catalog._env_checks()) == sorted(fabric_catalog.ENV_CHECKS)


def test_a_lab_subset_of_the_fabric_roles_loads(tmp_path):
    """What `gpufabric lab` writes: each tier narrowed to the roles a container runs, in the catalog's order."""
    builtin = fabric_catalog.load_catalog()
    for name in ("nebius/gpu-h100-sxm", "baremetal/hgx-h100-ib-ndr-sriov", "oci/BM.GPU.H100.8", "gcp/a3-megagpu-8g"):
        override = tmp_path / "lab.yml"
        override.write_text(yaml.safe_dump(lab_files.catalog_override(name, builtin.get(name))), encoding="utf-8")
        fabric_catalog.load_catalog([override])


def test_a_second_load_reuses_the_parsed_catalog_until_a_file_changes(tmp_path):
    text = "profiles:\n  gcp/a3-megagpu-8g:\n    tiers:\n      best:\n        env:\n          X_A: '1'\n"
    override = write(tmp_path, text)
    first = fabric_catalog.load_catalog([override])
    parses = fabric_catalog.catalog_parses
    again = fabric_catalog.load_catalog([override])
    assert fabric_catalog.catalog_parses == parses, "an unchanged catalog must not be parsed again"
    assert again.profiles == first.profiles and again is not first
    again.profiles["gcp/a3-megagpu-8g"]["fabric"] = "changed by a caller"
    assert fabric_catalog.load_catalog([override]).get("gcp/a3-megagpu-8g")["fabric"] == "tcpxo"

    # Same size, new mtime: the file is read again and its new value is what the catalog says.
    override.write_text(override.read_text(encoding="utf-8").replace("'1'", "'2'"), encoding="utf-8")
    stat = override.stat()
    os.utime(override, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    changed = fabric_catalog.load_catalog([override])
    assert fabric_catalog.catalog_parses == parses + 1
    assert changed.get("gcp/a3-megagpu-8g")["tiers"]["best"]["env"]["X_A"] == "2"


def test_a_missing_override_is_refused_on_every_load(tmp_path):
    for _attempt in range(2):
        with pytest.raises(CatalogError, match=r"missing\.yml"):
            fabric_catalog.load_catalog([tmp_path / "missing.yml"])


# --- NICs by identity (issue 41): no profile names an interface; the host's names fill the placeholders -------------


def _names_in(value):
    """Every word of a catalog value that looks like an interface name an image gives (eth0, enp6s0, ib0, ...)."""
    return re.findall(r"\b(?:eth[0-9]+|en[pso][0-9][0-9a-z]*|ib[0-9]+|rdma[0-9]+|gpu[0-9]+rdma[0-9]+)\b", str(value))


def test_no_profile_names_an_interface(builtin):
    """The images of one cloud name the same NICs differently (Google's Ubuntu enp*, COS eth*; nic_names.yml):
    no profile's host values name one (k8s_env: the pod's names, which GKE and the device plugins give)."""
    for name in builtin.names():
        profile = builtin.get(name)
        assert "interfaces" not in profile["nics"]["gpu"], name
        assert "interface" not in profile["nics"]["management"], name
        for tier_name, tier in profile["tiers"].items():
            for key, value in tier["env"].items():
                assert _names_in(value) == [], (name, tier_name, key, value)


def test_gcp_env_names_nics_by_placeholder(builtin):
    high = builtin.get("gcp/a3-highgpu-8g")["tiers"]["best"]["env"]
    assert high["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "{nics.gpu}"
    assert high["NCCL_GPUDIRECTTCPX_CTRL_DEV"] == high["NCCL_SOCKET_IFNAME"] == "{nics.management}"
    assert high["NCCL_GPUDIRECTTCPX_TX_BINDINGS"] == TCPX_TX.format(*GPU_PLACEHOLDERS)
    for name in ("gcp/a3-ultragpu-8g", "gcp/a4-highgpu-8g", "gcp/a4x-highgpu-4g"):
        assert builtin.get(name)["nics"]["management"]["count"] == 2, name
        for tier in ("best", "standard"):
            assert builtin.get(name)["tiers"][tier]["env"]["NCCL_SOCKET_IFNAME"] == "{nics.management}", (name, tier)
    assert builtin.get("gcp/a4x-highgpu-4g")["tiers"]["best"]["env"]["UCX_NET_DEVICES"] == "{nics.gpu}"
