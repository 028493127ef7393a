# SPDX-License-Identifier: Apache-2.0
"""The catalog's images: a cloud's own GPU image (or a site's golden image), its OS, and the host-stack roles that
adopt the stack it ships. A host names its image with gpufabric_image; the plan carries it, the probe reads the
image's installed stack packages, and `gpufabric plan` shows both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufabric import os_targets, supply
from gpufabric.collection import module_utils, plugin_utils
from gpufabric.plan import adoption_line

fabric_catalog = plugin_utils("fabric_catalog")
fabric_plan = plugin_utils("fabric_plan")
hw_facts = module_utils("hw_facts")
GCP_2204 = "gcp/ubuntu-accelerator-2204-amd64-with-nvidia-570"
IMAGE = {
    "description": "a golden image",
    "reference": "projects/site/global/images/family/golden",
    "os": "ubuntu-22.04",
    "adopt": ["nvidia_driver"],
}


@pytest.fixture(scope="module")
def catalog():
    return fabric_catalog.load_catalog()


def test_the_builtin_images_name_a_known_os_and_roles_that_adopt(catalog):
    assert GCP_2204 in catalog.images
    for name, image in catalog.images.items():
        assert image["os"] in os_targets.OS_TARGETS, name
        assert set(image["adopt"]) <= set(fabric_catalog.ADOPTING_ROLES), name
        assert image["sources"], f"{name}: every image says where its facts come from"


def test_the_catalog_knows_the_os_names_gpufabric_os_accepts():
    assert tuple(os_targets.OS_TARGETS) == fabric_catalog.OS_NAMES


def site_file(tmp_path: Path, images: dict) -> Path:
    import yaml

    path = tmp_path / "site.yml"
    path.write_text(yaml.safe_dump({"images": images}))
    return path


def test_a_site_file_adds_its_golden_image_and_replaces_a_builtin_one_whole(tmp_path):
    replaced = {**IMAGE, "os": "ubuntu-22.04", "adopt": []}
    catalog = fabric_catalog.load_catalog([site_file(tmp_path, {"site/golden": IMAGE, GCP_2204: replaced})])
    assert catalog.images["site/golden"] == IMAGE
    assert catalog.images[GCP_2204] == replaced


@pytest.mark.parametrize(
    ("name", "change", "where", "says"),
    [
        ("site/golden", {"os": "ubuntu-20.04"}, "images.site/golden.os", "accepted: ubuntu-22.04"),
        ("site/golden", {"adopt": ["nccl_env"]}, "images.site/golden.adopt", "accepted: nvidia_driver, rdma_stack"),
        (
            "site/golden",
            {"adopt": ["nvidia_driver", "nvidia_driver"]},
            "images.site/golden.adopt",
            "names a role twice",
        ),
        ("site/golden", {"kernel": "6.8"}, "images.site/golden.kernel", "unknown key; accepted: description"),
        ("site/golden", {"os": None}, "images.site/golden.os", ""),
        ("Golden Image", {}, "images.Golden Image", "is not an image name; accepted: '<cloud>/<image>'"),
    ],
)
def test_a_bad_image_is_refused_naming_file_key_and_what_is_accepted(tmp_path, name, change, where, says):
    image = {key: value for key, value in {**IMAGE, **change}.items() if value is not None}
    path = site_file(tmp_path, {name: image})
    with pytest.raises(fabric_catalog.CatalogError) as caught:
        fabric_catalog.load_catalog([path])
    assert (caught.value.source, caught.value.key) == (str(path), where)
    assert says in caught.value.reason


def test_the_plan_carries_the_hosts_image(catalog):
    host = {"gpufabric_profile": "gcp/a3-megagpu-8g", "gpufabric_image": GCP_2204}
    plan = fabric_plan.plan_host(host, catalog)
    assert plan["image"] == {
        "name": GCP_2204,
        "reference": catalog.images[GCP_2204]["reference"],
        "os": "ubuntu-22.04",
        "adopt": ["nvidia_driver"],
    }
    assert fabric_plan.plan_host({"gpufabric_profile": "gcp/a3-megagpu-8g"}, catalog)["image"] is None
    assert fabric_plan.plan_host({"gpufabric_image": GCP_2204}, catalog)["image"]["os"] == "ubuntu-22.04"


@pytest.mark.parametrize(("value", "says"), [("gcp/ubuntu-2204", "is not a catalog image"), (["x"], "not text")])
def test_an_unknown_image_is_refused_not_ignored(catalog, value, says):
    """A typo must not turn adopting the image's stack into replacing it."""
    with pytest.raises(fabric_plan.PlanError, match=f"host var gpufabric_image .*{says}.*accepted: "):
        fabric_plan.plan_host({"gpufabric_profile": "gcp/a3-megagpu-8g", "gpufabric_image": value}, catalog)


def dpkg_status(root: Path, stanzas: list[str]) -> None:
    path = root / "var" / "lib" / "dpkg" / "status"
    path.parent.mkdir(parents=True)
    path.write_text("\n\n".join(stanzas) + "\n")


def test_the_probe_reads_the_stack_packages_dpkg_has_installed(tmp_path):
    dpkg_status(
        tmp_path,
        [
            "Package: nvidia-utils-570-server\nStatus: hold ok installed\nVersion: 570.172.08-0ubuntu0.22.04.1",
            "Package: libnvidia-compute-570-server\nStatus: install ok installed\nArchitecture: amd64\n"
            "Version: 570.172.08-0ubuntu0.22.04.1\nDescription: NVIDIA libcompute package\n more text: not a field",
            "Package: nvidia-fabricmanager-570\nStatus: deinstall ok config-files\nVersion: 570.172.08-1",
            "Package: bash\nStatus: install ok installed\nVersion: 5.1-6ubuntu1",
        ],
    )
    assert hw_facts.stack_packages(hw_facts.Sysfs(str(tmp_path))) == {
        "libnvidia-compute-570-server": "570.172.08-0ubuntu0.22.04.1",
        "nvidia-utils-570-server": "570.172.08-0ubuntu0.22.04.1",
    }
    assert hw_facts.stack_packages(hw_facts.Sysfs(str(tmp_path / "no-dpkg"))) is None
    # Read only when asked (the probe asks): the facts of every apply and drift stay as small as before.
    assert hw_facts.gather(str(tmp_path))["host"]["packages"] is None
    assert hw_facts.gather(str(tmp_path), packages=True)["host"]["packages"] == hw_facts.stack_packages(
        hw_facts.Sysfs(str(tmp_path))
    )


def test_supply_facts_come_from_the_probe_then_gpufabric_os_then_the_image():
    image = {"name": GCP_2204, "os": "ubuntu-22.04"}
    probed = {
        "host": {"os": {"id": "ubuntu", "version_id": "24.04"}, "kernel": "6.8.0-1015-gcp", "packages": {"a": "1"}}
    }
    facts, name, where = supply.host_facts({"gpufabric_os": "debian-12"}, probed, image)
    assert (name, where, facts["kernel"], facts["packages"]) == (
        "ubuntu-24.04",
        "probe",
        "6.8.0-1015-gcp",
        {"a": [{"version": "1"}]},
    )
    assert supply.host_facts({"gpufabric_os": "debian-12"}, None, image)[1:] == ("debian-12", "gpufabric_os")
    facts, name, where = supply.host_facts({}, None, image)
    assert (name, where, "packages" in facts) == ("ubuntu-22.04", f"image {GCP_2204}", False)
    assert supply.host_facts({}, None, None)[0] is None


def test_the_plan_says_in_one_line_what_a_role_adopts_and_installs():
    unknown = {"mode": "adopt", "known": False, "found": {}, "missing": [], "refused": ""}
    assert "run with --probe" in adoption_line(unknown)
    found = {**unknown, "known": True, "found": {"nvidia-utils-570-server": "570.172.08-0ubuntu0.22.04.1"}}
    assert adoption_line({**found, "missing": ["nvidia-fabricmanager-570"]}) == (
        "adopts the image's nvidia-utils-570-server 570.172.08-0ubuntu0.22.04.1 (held at these versions); "
        "installs what the image lacks: nvidia-fabricmanager-570"
    )
    assert adoption_line({**unknown, "known": True, "missing": ["nvidia-open"]}).endswith("installs nvidia-open")


def test_the_inventory_can_give_the_images_nic_names_and_they_reach_everything_in_the_plan(catalog):
    """gpufabric_nic_names: an image bake on a builder without the NICs says which names the image gives them."""
    mega = {"gpufabric_profile": "gcp/a3-megagpu-8g"}
    symbolic = fabric_plan.plan_host(mega, catalog)
    assert symbolic["nic_names"] is None
    assert symbolic["env"]["NCCL_SOCKET_IFNAME"] == "{nics.management}"
    assert symbolic["nic_placeholders"] == ["NCCL_FASTRAK_CTRL_DEV", "NCCL_FASTRAK_IFNAME", "NCCL_SOCKET_IFNAME"]
    cos = {"management": ["eth0"], "gpu": [f"eth{n}" for n in range(1, 9)]}
    plan = fabric_plan.plan_host({**mega, "gpufabric_nic_names": cos}, catalog)
    assert plan["nic_names"] == cos
    assert plan["nics"]["gpu"]["interfaces"] == cos["gpu"]
    assert plan["nics"]["management"]["interfaces"] == ["eth0"]
    assert (plan["env"]["NCCL_SOCKET_IFNAME"], plan["env"]["NCCL_FASTRAK_CTRL_DEV"]) == ("eth0", "eth0")
    assert plan["env"]["NCCL_FASTRAK_IFNAME"] == "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"
    assert list(plan["env"]) == list(symbolic["env"])  # nccl.conf order kept


@pytest.mark.parametrize(
    ("hostvars", "says"),
    [
        (
            {"gpufabric_interface_naming": "net_ifnames_0"},
            "host var gpufabric_interface_naming 'net_ifnames_0' is no longer read",
        ),
        (
            {"gpufabric_nic_names": {"gpu": ["eth1"], "management": ["eth0"]}},
            "profile gcp/a3-megagpu-8g: NCCL_FASTRAK_IFNAME needs {nics.gpu}, but gpufabric_nic_names gives "
            "1 of 8 gpu NICs (gvnic): eth1; 1 of 1 management NICs (gvnic): eth0",
        ),
        (
            {"gpufabric_nic_names": {"gpu": ["eth 1"]}},
            "host var gpufabric_nic_names.gpu[0] 'eth 1' is not an interface name (holds a character outside the "
            "accepted ones); accepted: 1 to 15 bytes (Linux's IFNAMSIZ - 1)",
        ),
        (
            {"gpufabric_nic_names": {"gpu": ["eth1", "enp0s12345678901"]}},
            "host var gpufabric_nic_names.gpu[1] 'enp0s12345678901' is not an interface name (16 bytes long)",
        ),
        (
            {"gpufabric_nic_names": {"management": ["eth0\n"]}},
            "host var gpufabric_nic_names.management[0] 'eth0\\n' is not an interface name",
        ),
        (
            {"gpufabric_nic_names": {"gpu": "eth1"}},
            "host var gpufabric_nic_names.gpu 'eth1' is not accepted; accepted: a list of interface names",
        ),
        ({"gpufabric_nic_names": ["eth0"]}, "host var gpufabric_nic_names ['eth0'] is not accepted"),
    ],
)
def test_nic_names_the_profile_cannot_take_are_refused(catalog, hostvars, says):
    with pytest.raises(fabric_plan.PlanError, match=re.escape(says)):
        fabric_plan.plan_host({"gpufabric_profile": "gcp/a3-megagpu-8g", **hostvars}, catalog)


def test_an_image_says_nothing_of_interface_names(tmp_path):
    """Images no longer carry interface_naming: the names are read from the host (fabric_nics)."""
    with pytest.raises(fabric_catalog.CatalogError, match="interface_naming: unknown key"):
        fabric_catalog.load_catalog([site_file(tmp_path, {"site/cos": {**IMAGE, "interface_naming": "net_ifnames_0"}})])


CANONICAL_570 = "570.195.03-0ubuntu0.22.04.2"  # the TEST-DOUBLE image's set (tests/fixtures/images/)


def test_on_a_catalog_image_site_yml_switches_the_driver_to_adopt_and_the_plan_shows_what_it_found(catalog):
    """One code path: supply.py renders nvidia_driver's settings with site.yml's vars, which read the plan's image."""
    hostvars = {
        "gpufabric_profile": "gcp/a3-megagpu-8g",
        "gpufabric_image": GCP_2204,
        "nvidia_driver_branch": "570",
        "nvidia_driver_version": "570.133.20",
    }
    host_plan = fabric_plan.plan_host(hostvars, catalog)
    facts, os_name, where = supply.host_facts(hostvars, None, host_plan["image"])
    unknown = supply.host_supply(host_plan, hostvars, facts, os_name, where)
    assert unknown["adopt"]["nvidia_driver"]["known"] is False
    shipped = {"nvidia-utils-570-server": CANONICAL_570, "libnvidia-compute-570-server": CANONICAL_570}
    facts["packages"] = {name: [{"version": version}] for name, version in shipped.items()}
    chain = supply.host_supply(host_plan, hostvars, facts, os_name, where)
    adoption = chain["adopt"]["nvidia_driver"]
    assert adoption["known"] and adoption["found"] == shipped and adoption["missing"] == ["nvidia-fabricmanager-570"]
    installed = [pin for step in chain["roles"]["nvidia_driver"] for pin in step["packages"]]
    assert {"name": "nvidia-fabricmanager-570", "version": "570.195.03-*"} in [
        {key: pin[key] for key in ("name", "version")} for pin in installed
    ]
    assert chain["apt_pins"]["nvidia_driver"][0]["content"].endswith("Pin-Priority: 400\n")
    # The inventory's own choice wins over the image's.
    chain = supply.host_supply(host_plan, {**hostvars, "nvidia_driver_provision": "install"}, facts, os_name, where)
    assert "nvidia_driver" not in chain["adopt"]


def test_the_plan_role_s_lookup_carries_the_image_that_site_yml_adopts_from():
    """site.yml reads gpufabric_plan.image (resolved by the plan role's lookup) to switch the roles it names to adopt:
    the lookup must pass the host var gpufabric_image on, or a host on a catalog image is installed over."""
    import json
    import os
    import subprocess
    import sys

    from gpufabric.collection import collections_path

    expression = (
        "{{ lookup('gpufabric.cluster.fabric_plan', profile='gcp/a3-megagpu-8g', image='%s').image | to_json }}"
    )
    images = []
    for image in (GCP_2204, ""):
        run = subprocess.run(
            [
                str(Path(sys.executable).parent / "ansible"),
                "localhost",
                "-m",
                "ansible.builtin.debug",
                "-a",
                f"msg={expression % image}",
                "-o",
            ],
            env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections_path()), "ANSIBLE_LOCALHOST_WARNING": "0"},
            capture_output=True,
            text=True,
            check=True,
        )
        images.append(json.loads(json.loads(run.stdout.split("=>", 1)[1])["msg"]))
    assert images[0]["name"] == GCP_2204 and images[0]["adopt"] == ["nvidia_driver"]
    assert images[1] is None
    role = (Path(__file__).resolve().parents[2] / "roles/plan/tasks/main.yml").read_text(encoding="utf-8")
    assert "image=gpufabric_image | default('')" in role


def test_the_plan_passes_on_what_the_roles_warn_of_for_a_probed_image(catalog):
    """Azure's ubuntu-hpc 22.04 adopts rdma_stack with the default inbox flavor; probed, the image ships DOCA-OFED
    (the packages of tests/fixtures/images/doubles/azure-ubuntu-hpc-2204.yml): the plan says DOCA is adopted instead."""
    hostvars = {"gpufabric_profile": "azure/Standard_ND96isr_H200_v5", "gpufabric_image": "azure/ubuntu-hpc-2204"}
    host_plan = fabric_plan.plan_host(hostvars, catalog)
    packages = {"doca-ofed": "3.2.1-1", "rdma-core": "2510mlnx0-1.2510000", "ucx": "1.18.0-1.2510000"}
    os_release = {"id": "ubuntu", "version_id": "22.04"}
    probed = {"host": {"os": os_release, "kernel": "6.8.0-1044-azure", "packages": packages}}
    facts, name, where = supply.host_facts(hostvars, probed, host_plan["image"])
    chain = supply.host_supply(host_plan, hostvars, facts, name, where)
    assert chain["adopt"]["rdma_stack"]["found"] == packages
    (warning,) = [warning for warning in chain["warnings"] if warning.startswith("rdma_stack: ")]
    assert "rdma_stack_flavor is 'inbox' and the image ships DOCA-OFED/MLNX_OFED" in warning
    assert "the doca flavor is adopted" in warning
    assert supply.unknown_os("")["warnings"] == []
