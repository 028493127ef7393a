# SPDX-License-Identifier: Apache-2.0
"""`gpufabric k8s manifests` in-process: objects, upstream required fields, naming, options, atomic writes.

The plans come from the real catalog through fabric_plan.plan_host (no inventory subprocess);
test_cli_k8s.py runs the real command.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

import pytest
import yaml

from gpufabric import k8s
from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError

fabric_catalog = plugin_utils("fabric_catalog")
fabric_plan = plugin_utils("fabric_plan")

SRIOV_PROFILE = "baremetal/hgx-h100-ib-ndr-sriov"
RAILS = [f"ibp{bus}s0" for bus in ("0c", "12", "3a", "5d", "8c", "92", "ba", "dd")]

# --- required fields, from the upstream schemas -----------------------------------------------------------
# NetworkAttachmentDefinition: k8snetworkplumbingwg/network-attachment-definition-client
# artifacts/networks-crd.yaml (openAPIV3Schema: required [spec]; spec.required [config]; config type string),
# plus what every Kubernetes object needs (apiVersion, kind, metadata.name; multi-net-spec v1 section 3.2:
# "ObjectMeta is mandatory, as an object name is required"). Names: multi-net-spec v1 section 3.3, DNS-1123 label.
NAD_API_VERSION = "k8s.cni.cncf.io/v1"
NAD_REQUIRED = ("apiVersion", "kind", "metadata", "spec")
NAD_SPEC_REQUIRED = ("config",)
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Annotation the device plugin's resource is named in: sriov-network-device-plugin deployments/sriov-crd.yaml.
RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"
# CNI network configuration: containernetworking/cni SPEC.md. Spec 1.0 "Configuration format": a configuration
# list has cniVersion, name, plugins; each plugin configuration object requires type. The single-plugin form
# (spec 0.4 "Network Configuration": "Fields ... are required unless specifically marked optional") has
# cniVersion, name, type. ipam, where present, requires type. name: alphanumeric first, then [A-Za-z0-9_.-].
CNI_LIST_REQUIRED = ("cniVersion", "name", "plugins")
CNI_PLUGIN_REQUIRED = ("type",)
CNI_SINGLE_REQUIRED = ("cniVersion", "name", "type")
CNI_IPAM_REQUIRED = ("type",)
CNI_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
# SR-IOV network device plugin config: README "Config parameters" (resourceName: required Y; resourcePrefix,
# deviceType, selectors: N) and pkg/types/types.go (ResourceConfList.resourceList, NetDeviceSelectors fields).
# This generator also requires selectors: a resource without them would select every network device.
DP_REQUIRED = ("resourceName", "selectors")
DP_KNOWN_KEYS = {"resourceName", "resourcePrefix", "deviceType", "excludeTopology", "selectors"}
DP_SELECTOR_KEYS = {
    "vendors",
    "devices",
    "drivers",
    "pciAddresses",
    "pfNames",
    "rootDevices",
    "linkTypes",
    "ddpProfiles",
    "isRdma",
    "needVhostNet",
    "vdpaType",
}
DP_LINK_TYPES = {"ether", "infiniband"}  # README selector examples
RESOURCE_NAME = re.compile(r"^[a-zA-Z0-9_]+$")  # sriov-network-operator resourceName rule
# ConfigMap (core/v1): apiVersion, kind, metadata.name; data values are strings.
CONFIGMAP_REQUIRED = ("apiVersion", "kind", "metadata")


def assert_nad(document: dict) -> dict:
    for key in NAD_REQUIRED:
        assert key in document, key
    assert document["apiVersion"] == NAD_API_VERSION
    assert document["kind"] == "NetworkAttachmentDefinition"
    name = document["metadata"]["name"]
    assert DNS_1123_LABEL.match(name) and len(name) <= 63, name
    for key in NAD_SPEC_REQUIRED:
        assert key in document["spec"], key
    assert isinstance(document["spec"]["config"], str)
    config = json.loads(document["spec"]["config"])
    assert_cni(config)
    # multi-net-spec 3.4.3 strongly recommends the CNI name match the object name.
    assert config["name"] == name
    return config


def assert_cni(config: dict) -> None:
    plugins = [config]
    if "plugins" in config:
        for key in CNI_LIST_REQUIRED:
            assert key in config, key
        plugins = config["plugins"]
        assert plugins
        for plugin in plugins:
            for key in CNI_PLUGIN_REQUIRED:
                assert isinstance(plugin.get(key), str), key
    else:
        for key in CNI_SINGLE_REQUIRED:
            assert isinstance(config.get(key), str), key
    assert CNI_NAME.match(config["name"])
    assert re.match(r"^\d+\.\d+\.\d+$", config["cniVersion"])
    for plugin in plugins:
        if "ipam" in plugin:
            for key in CNI_IPAM_REQUIRED:
                assert key in plugin["ipam"], key


def assert_device_plugin_config(configmap: dict) -> dict:
    for key in CONFIGMAP_REQUIRED:
        assert key in configmap, key
    assert (configmap["apiVersion"], configmap["kind"]) == ("v1", "ConfigMap")
    assert configmap["metadata"] == {"name": "sriovdp-config", "namespace": "kube-system"}
    assert all(isinstance(value, str) for value in configmap["data"].values())
    config = json.loads(configmap["data"]["config.json"])
    assert set(config) == {"resourceList"}
    names = set()
    for resource in config["resourceList"]:
        for key in DP_REQUIRED:
            assert key in resource, key
        assert set(resource) <= DP_KNOWN_KEYS
        assert RESOURCE_NAME.match(resource["resourceName"])
        key = (resource.get("resourcePrefix"), resource["resourceName"])
        assert key not in names, "resourceName must be unique within its prefix"
        names.add(key)
        selectors = resource["selectors"]
        assert set(selectors) <= DP_SELECTOR_KEYS
        for name, value in selectors.items():
            if name in ("isRdma", "needVhostNet"):
                assert isinstance(value, bool)
            elif name != "vdpaType":
                assert isinstance(value, list) and all(isinstance(item, str) for item in value), name
        assert set(selectors["linkTypes"]) <= DP_LINK_TYPES
    return config


def load_all(files: dict[str, str]) -> dict[str, list[dict]]:
    loaded = {}
    for name, text in files.items():
        if name.endswith(".yaml"):
            loaded[name] = [document for document in yaml.safe_load_all(text) if document is not None]
    return loaded


# --- fixtures --------------------------------------------------------------------------------------------------


def catalog_with(tmp_path: Path, overrides: dict | None = None):
    files = []
    if overrides:
        path = tmp_path / "override.yml"
        path.write_text(yaml.safe_dump({"profiles": overrides}))
        files.append(path)
    return fabric_catalog.load_catalog(files)


def fleet(catalog, hosts: dict[str, dict], tier: str | None = None) -> dict:
    roles = set(fabric_catalog.KNOWN_ROLES)
    return {
        "hosts": {
            name: fabric_plan.plan_host(variables, catalog, tier=tier, roles_present=roles)
            for name, variables in sorted(hosts.items())
        }
    }


def build(catalog, plan, options=None, tier=None):
    options = options or k8s.Options()
    result = k8s.networks(plan, catalog, tier, options, "inv")
    return result, k8s.manifests(result, options, "inv")


LAB = {
    "node-0": {"gpufabric_profile": SRIOV_PROFILE},
    "node-1": {"gpufabric_profile": SRIOV_PROFILE},
    "plain-ib": {"gpufabric_profile": "baremetal/hgx-h100-ib-ndr"},
}

ROCE_SRIOV = {
    "baremetal/hgx-h100-roce-400g": {
        "sriov": {"vfs_per_nic": 4},
        "tiers": {
            "best": {
                "roles": ["fabric_facts", "host_tuning", "rdma_stack", "nvidia_driver", "roce", "sriov", "nccl_env"]
            }
        },
    }
}


@pytest.fixture(scope="module")
def builtin():
    return fabric_catalog.load_catalog()


# --- the InfiniBand profile as shipped ---------------------------------------------------------------------------


def test_infiniband_profile_one_pool_with_upstream_fields(builtin):
    result, files = build(builtin, fleet(builtin, LAB))
    assert [network.profile for network in result] == [SRIOV_PROFILE]
    assert result[0].hosts == ["node-0", "node-1"]  # the plain IB host carves no VFs
    loaded = load_all(files)
    assert sorted(files) == [
        "00-sriovdp-config.yaml",
        "10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml",
        "30-admission-policy.yaml",
        "README.md",
    ]
    [configmap] = loaded["00-sriovdp-config.yaml"]
    config = assert_device_plugin_config(configmap)
    [resource] = config["resourceList"]
    assert resource["resourcePrefix"] == "nvidia.com"
    assert resource["resourceName"] == "rdma_vf_hgx_h100_ib_ndr_sriov"
    assert resource["selectors"] == {
        "vendors": ["15b3"],
        "devices": ["101e"],  # ConnectX-7 PF 1021 -> generic mlx5Gen VF 101e
        "drivers": ["mlx5_core"],
        "linkTypes": ["infiniband"],
        "isRdma": True,
    }
    [nad] = loaded["10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml"]
    cni = assert_nad(nad)
    assert nad["metadata"]["namespace"] == "default"
    assert nad["metadata"]["annotations"] == {RESOURCE_ANNOTATION: "nvidia.com/rdma_vf_hgx_h100_ib_ndr_sriov"}
    assert cni["type"] == "ib-sriov"
    assert cni["rdmaIsolation"] is True
    assert cni["ipam"] == {"type": "whereabouts", "range": k8s.PLACEHOLDER_IPAM_RANGE}


def test_placeholder_range_is_flagged_in_the_file_and_readme(builtin):
    _result, files = build(builtin, fleet(builtin, LAB))
    assert "SITE-SPECIFIC" in files["10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml"]
    assert "SITE-SPECIFIC" in files["README.md"]
    _result, given = build(builtin, fleet(builtin, LAB), k8s.Options(ipam_range="10.50.0.0/16"))
    assert "SITE-SPECIFIC" not in given["10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml"]
    assert '"range": "10.50.0.0/16"' in given["10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml"]


def test_options_reach_the_objects(builtin):
    options = k8s.Options(resource_prefix="example.org", namespace="training", ipam_range="10.9.0.0/16")
    _result, files = build(builtin, fleet(builtin, LAB), options)
    loaded = load_all(files)
    config = assert_device_plugin_config(loaded["00-sriovdp-config.yaml"][0])
    assert config["resourceList"][0]["resourcePrefix"] == "example.org"
    [nad] = loaded["10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml"]
    assert nad["metadata"]["namespace"] == "training"
    assert nad["metadata"]["annotations"][RESOURCE_ANNOTATION] == "example.org/rdma_vf_hgx_h100_ib_ndr_sriov"


def test_readme_pod_snippet_parses_and_carries_k8s_env(builtin):
    _result, files = build(builtin, fleet(builtin, LAB))
    text = files["README.md"]
    for fragment in ("node-0", "node-1", "kubectl apply -f", "rdma system set netns exclusive", "rdma-cni"):
        assert fragment in text
    assert "k8s-rdma-shared-dev-plugin" in text
    assert "kubectl label node node-0 gpufabric.io/profile=baremetal.hgx-h100-ib-ndr-sriov" in text
    [snippet] = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    pod = yaml.safe_load(snippet)
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8, "nvidia.com/rdma_vf_hgx_h100_ib_ndr_sriov": 8}
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env == {"NCCL_IB_HCA": "mlx5"}  # k8s_env replaces the host value, UCX_NET_DEVICES: null unsets it
    networks = pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].split(",")
    assert networks == ["rdma-hgx-h100-ib-ndr-sriov"] * 8
    assert "UCX_NET_DEVICES" in text


# --- per rail, Ethernet, storage -----------------------------------------------------------------------------------


def named(hosts: dict[str, dict]) -> dict[str, dict]:
    """The hosts with their PF netdevs named (the host var gpufabric_nic_names: the catalog names no interface)."""
    return {name: {**variables, "gpufabric_nic_names": {"gpu": RAILS}} for name, variables in hosts.items()}


def test_named_pfs_give_one_resource_and_network_per_rail(tmp_path):
    catalog = catalog_with(tmp_path)
    _result, files = build(catalog, fleet(catalog, named(LAB)), k8s.Options(ipam_range="10.20.0.0/16"))
    loaded = load_all(files)
    config = assert_device_plugin_config(loaded["00-sriovdp-config.yaml"][0])
    assert [resource["resourceName"] for resource in config["resourceList"]] == [
        f"rdma_vf_hgx_h100_ib_ndr_sriov_rail{index}" for index in range(8)
    ]
    assert [resource["selectors"]["pfNames"] for resource in config["resourceList"]] == [[rail] for rail in RAILS]
    nads = loaded["10-nad-rdma-hgx-h100-ib-ndr-sriov.yaml"]
    assert len(nads) == 8
    ranges = []
    for index, nad in enumerate(nads):
        cni = assert_nad(nad)
        assert nad["metadata"]["name"] == f"rdma-hgx-h100-ib-ndr-sriov-rail{index}"
        assert nad["metadata"]["annotations"][RESOURCE_ANNOTATION].endswith(f"_rail{index}")
        ranges.append(ipaddress.ip_network(cni["ipam"]["range"]))
    assert ranges[0] == ipaddress.ip_network("10.20.0.0/19")
    assert all(ipaddress.ip_network("10.20.0.0/16").supernet_of(network) for network in ranges)
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    [snippet] = re.findall(r"```yaml\n(.*?)```", files["README.md"], flags=re.DOTALL)
    limits = yaml.safe_load(snippet)["spec"]["containers"][0]["resources"]["limits"]
    assert {key: value for key, value in limits.items() if "rail" in key} == {
        f"nvidia.com/rdma_vf_hgx_h100_ib_ndr_sriov_rail{index}": 1 for index in range(8)
    }


def test_ethernet_profile_chains_sriov_with_rdma(tmp_path):
    catalog = catalog_with(tmp_path, ROCE_SRIOV)
    plan = fleet(catalog, {"roce-0": {"gpufabric_profile": "baremetal/hgx-h100-roce-400g"}})
    result, files = build(catalog, plan, k8s.Options(storage_interface="eth1", ipam_range="10.30.0.0/16"))
    assert result[0].link_type == "ethernet"
    loaded = load_all(files)
    config = assert_device_plugin_config(loaded["00-sriovdp-config.yaml"][0])
    assert config["resourceList"][0]["selectors"]["linkTypes"] == ["ether"]
    [nad] = loaded["10-nad-rdma-hgx-h100-roce-400g.yaml"]
    cni = assert_nad(nad)
    assert [plugin["type"] for plugin in cni["plugins"]] == ["sriov", "rdma"]
    assert cni["plugins"][0]["ipam"]["type"] == "whereabouts"
    [storage] = loaded["20-nad-storage-ipvlan.yaml"]
    storage_cni = assert_nad(storage)
    assert RESOURCE_ANNOTATION not in storage["metadata"].get("annotations", {})
    assert (storage_cni["type"], storage_cni["master"], storage_cni["mode"]) == ("ipvlan", "eth1", "l2")
    assert "SITE-SPECIFIC" in files["20-nad-storage-ipvlan.yaml"]  # no --storage-ipam-range given


def test_two_profiles_with_the_same_vfs_are_refused(tmp_path):
    copy = {"baremetal/other-ib-sriov": {**_builtin_profile(SRIOV_PROFILE), "instance_type": "other-ib-sriov"}}
    catalog = catalog_with(tmp_path, copy)
    plan = fleet(catalog, {**LAB, "b-0": {"gpufabric_profile": "baremetal/other-ib-sriov"}})
    with pytest.raises(UserError, match="would select the same virtual functions"):
        build(catalog, plan)


def test_infiniband_and_ethernet_profiles_coexist(tmp_path):
    catalog = catalog_with(tmp_path, ROCE_SRIOV)
    plan = fleet(catalog, {**LAB, "roce-0": {"gpufabric_profile": "baremetal/hgx-h100-roce-400g"}})
    result, files = build(catalog, plan)
    assert [network.link_type for network in result] == ["infiniband", "ethernet"]  # sorted by profile
    config = assert_device_plugin_config(load_all(files)["00-sriovdp-config.yaml"][0])
    assert len(config["resourceList"]) == 2


def _builtin_profile(name: str) -> dict:
    raw = yaml.safe_load((Path(fabric_catalog.BUILTIN_CATALOG_DIR) / "baremetal.yml").read_text())
    return raw["profiles"][name]


# --- refusals --------------------------------------------------------------------------------------------------------


def test_fleet_without_sriov_is_one_clear_error(builtin):
    plan = fleet(builtin, {"plain-ib": {"gpufabric_profile": "baremetal/hgx-h100-ib-ndr"}})
    with pytest.raises(UserError) as raised:
        build(builtin, plan)
    message = str(raised.value)
    assert "inventory 'inv'" in message
    assert "sriov:" in message and "tier best" in message


def test_standard_tier_has_no_vfs(builtin):
    with pytest.raises(UserError, match="at tier standard"):
        build(builtin, fleet(builtin, LAB, tier="standard"), tier="standard")


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (k8s.Options(resource_prefix="Not A Domain"), "--resource-prefix"),
        (k8s.Options(resource_prefix="kubernetes.io"), "reserved"),
        (k8s.Options(namespace="Bad_NS"), "--namespace"),
        (k8s.Options(storage_interface="eth0/1"), "--storage-interface"),
        (k8s.Options(storage_interface="a-very-long-interface-name"), "--storage-interface"),
        # 16 bytes in 8 characters, and a name with a trailing newline: both over what Linux takes (IFNAMSIZ - 1).
        (k8s.Options(storage_interface="é" * 8), "--storage-interface 'éééééééé' is not a network interface name (16"),
        (k8s.Options(storage_interface="eth1\n"), "--storage-interface 'eth1\\n' is not a network interface name"),
        (k8s.Options(ipam_range="10.0.0.1/16"), "--ipam-range"),
        (k8s.Options(ipam_range="not-a-cidr"), "--ipam-range"),
        (k8s.Options(storage_ipam_range="10.1.0.0/16"), "needs --storage-interface"),
    ],
)
def test_bad_options(options, fragment):
    with pytest.raises(UserError, match=re.escape(fragment)):
        k8s.check_options(options)


def test_range_too_small_for_the_rails(tmp_path):
    catalog = catalog_with(tmp_path)
    with pytest.raises(UserError, match="too small to split into 8"):
        build(catalog, fleet(catalog, named(LAB)), k8s.Options(ipam_range="10.0.0.0/28"))


def test_unknown_pf_id_is_refused(tmp_path):
    catalog = catalog_with(tmp_path, {SRIOV_PROFILE: {"nics": {"gpu": {"pci_ids": ["15b3:ffff"]}}}})
    with pytest.raises(UserError, match="15b3:ffff"):
        build(catalog, fleet(catalog, LAB))


# --- writing -----------------------------------------------------------------------------------------------------


def listing(directory):
    return sorted(path.name for path in directory.iterdir())


def test_write_tree_creates_marks_and_refuses_non_empty(tmp_path):
    target = tmp_path / "out"
    written = k8s.write_tree(target, {"a.yaml": "a: 1\n", "README.md": "x\n"}, force=False)
    assert sorted(path.name for path in written) == ["README.md", "a.yaml"], "the marker is not reported"
    assert (target / "a.yaml").read_text() == "a: 1\n"
    marker = (target / k8s.MARKER).read_text()
    assert marker.splitlines()[1:] == ["README.md", "a.yaml"] and marker.startswith("# ")
    with pytest.raises(UserError, match="not empty; pass --force"):
        k8s.write_tree(target, {"b.yaml": "b: 1\n"}, force=False)
    assert listing(target) == [k8s.MARKER, "README.md", "a.yaml"]
    k8s.write_tree(target, {"b.yaml": "b: 1\n"}, force=True)
    assert listing(target) == [k8s.MARKER, "b.yaml"], "--force replaced what gpufabric wrote"
    assert listing(tmp_path) == ["out"]  # no staging or old directories left


def test_write_tree_into_an_empty_directory(tmp_path):
    target = tmp_path / "empty"
    target.mkdir()
    k8s.write_tree(target, {"a.yaml": "a: 1\n"}, force=False)
    assert (target / "a.yaml").exists()


@pytest.mark.parametrize(
    "intruder",
    [
        lambda d: (d / "mine.yaml").write_text("mine\n"),  # a file of the operator's
        lambda d: (d / "sub").mkdir(),  # a directory
        lambda d: (d / "a.yaml").unlink() or (d / "a.yaml").symlink_to("/etc/hostname"),  # a listed name, now a link
        lambda d: (d / ".env").write_text("TOKEN=x\n"),  # a hidden file
    ],
    ids=["file", "directory", "listed-name-now-a-link", "hidden-file"],
)
def test_force_never_removes_what_gpufabric_did_not_write(tmp_path, intruder):
    target = tmp_path / "out"
    k8s.write_tree(target, {"a.yaml": "a: 1\n"}, force=False)
    intruder(target)
    before = {path.name: (path.is_symlink(), path.is_file()) for path in target.iterdir()}
    with pytest.raises(UserError, match=r"which gpufabric did not write .*--force replaces only files gpufabric wrote"):
        k8s.write_tree(target, {"b.yaml": "b: 1\n"}, force=True)
    assert {path.name: (path.is_symlink(), path.is_file()) for path in target.iterdir()} == before


def test_a_directory_without_marker_is_never_replaced(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "00-sriovdp-config.yaml").write_text("hand-made\n")
    with pytest.raises(UserError, match=r"holds 00-sriovdp-config.yaml, which gpufabric did not write"):
        k8s.write_tree(target, {"00-sriovdp-config.yaml": "new\n"}, force=True)
    assert (target / "00-sriovdp-config.yaml").read_text() == "hand-made\n"


def test_write_tree_failure_leaves_nothing_half_written(tmp_path, monkeypatch):
    target = tmp_path / "out"
    k8s.write_tree(target, {"keep.yaml": "old\n"}, force=False)
    real = Path.write_text
    calls = []

    def failing(self, text, *args, **kwargs):
        calls.append(self.name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", failing)
    with pytest.raises(UserError, match="nothing was changed"):
        k8s.write_tree(target, {"a.yaml": "a\n", "b.yaml": "b\n"}, force=True)
    monkeypatch.undo()
    assert listing(target) == [k8s.MARKER, "keep.yaml"]
    assert (target / "keep.yaml").read_text() == "old\n"
    assert listing(tmp_path) == ["out"]


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: (tmp / "out").write_text("x"), "not a directory"),
        (lambda tmp: (tmp / "real").mkdir() or (tmp / "out").symlink_to(tmp / "real"), "is a symbolic link"),
        (lambda tmp: (tmp / "file").write_text("x"), "is a file, not a directory"),
    ],
    ids=["file", "symlink", "under-a-file"],
)
def test_write_tree_refuses_what_is_not_a_directory(tmp_path, make, fragment):
    make(tmp_path)
    target = tmp_path / "file" / "out" if fragment.startswith("is a file") else tmp_path / "out"
    before = listing(tmp_path)
    with pytest.raises(UserError, match=fragment):
        k8s.write_tree(target, {"a.yaml": "a\n"}, force=True)
    assert listing(tmp_path) == before


def test_write_tree_refuses_a_place_that_takes_no_directory():
    with pytest.raises(UserError, match=r"-o /proc/gpufabric-out: cannot create a directory in /proc"):
        k8s.write_tree(Path("/proc/gpufabric-out"), {"a.yaml": "a\n"}, force=False)
