# SPDX-License-Identifier: Apache-2.0
"""The catalog loader: built-in data, overrides, and one clear error per bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpufabric.collection import module_utils

fabric_catalog = module_utils("fabric_catalog")
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
    assert env["NCCL_FASTRAK_IFNAME"] == "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"
    assert "NCCL_ALGO" not in env


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
      management: {kind: ethernet, interface: eno1}
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
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "eth0"  # untouched keys survive the merge
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
            "item 1 ('eth2;reboot') 'eth2;reboot' is not accepted; accepted: an interface name",
            id="interface-semicolon",
        ),
        pytest.param(
            MEGA + "    nics: {gpu: {interfaces: [eth1234567890abcd]}}\n",
            "profiles.gcp/a3-megagpu-8g.nics.gpu.interfaces",
            "an interface name: 1-15",
            id="interface-too-long",
        ),
        pytest.param(
            MEGA + '    nics: {management: {interface: "eth0 eth1"}}\n',
            "profiles.gcp/a3-megagpu-8g.nics.management.interface",
            "'eth0 eth1' is not accepted",
            id="management-interface-space",
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
    override = write(tmp_path, text)
    with pytest.raises(CatalogError) as caught:
        fabric_catalog.load_catalog([override])
    assert (caught.value.source, caught.value.key) == (str(override), key)
    assert reason in caught.value.reason
    assert "\n" not in str(caught.value)  # one error line, whatever the value holds


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
    for _ in range(2):
        with pytest.raises(CatalogError, match=r"missing\.yml"):
            fabric_catalog.load_catalog([tmp_path / "missing.yml"])
