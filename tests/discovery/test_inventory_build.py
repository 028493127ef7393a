# SPDX-License-Identifier: Apache-2.0
"""The inventory builder, the static source, the CLI and the gpu_fleet plugin, end to end.

The static source stands in for any cloud here (the cloud sources have their
own tests against emulators): the builder, the renderers and the plugin do
not care where instances come from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpufabric.collection import plugin_utils

fleet_base = plugin_utils("fleet_base")
fleet_inventory = plugin_utils("fleet_inventory")
catalog = plugin_utils("fabric_catalog").load_catalog()
BIN = Path(sys.executable).parent
# A tag an attacker could set: if Ansible ever templated it, the file would appear.
EVIL = "{{ lookup('pipe', 'touch MARKER') }}"

STATIC_FLEET = """
hosts:
  - name: hgx-01
    address: 192.0.2.11
    profile: baremetal/hgx-h100-ib-ndr
    placement: rack a/1
    tags: {owner: "{evil}"}
  - name: hgx-02
    address: 192.0.2.12
    instance_type: hgx-h100-roce-400g
    placement: rack a/1
    vars: {ansible_user: ubuntu}
  - name: mystery
    address: 192.0.2.13
"""


def unwrap(value):
    """Drop the {"__ansible_unsafe": ...} wrappers ansible-inventory prints."""
    if isinstance(value, dict) and set(value) == {"__ansible_unsafe"}:
        return value["__ansible_unsafe"]
    if isinstance(value, dict):
        return {key: unwrap(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap(item) for item in value]
    return value


def listing(stdout: str) -> dict:
    """ansible-inventory --list's JSON with the _meta.profile 2.19 and later print (the encoding of its values,
    "inventory_legacy"; fleet_inventory prints it too): ansible-core 2.16 to 2.18 print none."""
    data = json.loads(stdout)
    data["_meta"].setdefault("profile", "inventory_legacy")
    return data


def ansible_inventory(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the real ansible-inventory with ``args``."""
    return subprocess.run([str(BIN / "ansible-inventory"), *args], capture_output=True, text=True, env=env, check=check)


def instance(**overrides):
    values = {
        "cloud": "aws",
        "instance_id": "i-0001",
        "name": "p5-a",
        "instance_type": "p5.48xlarge",
        "state": fleet_base.RUNNING,
        "region": "us-east-1",
        "zone": "us-east-1a",
        "private_ip": "10.0.0.1",
        "public_ip": "198.51.100.1",
        "placement": "pg-1",
    }
    return fleet_base.Instance(**{**values, **overrides})


@pytest.fixture
def static_fleet(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "fleet.yml"
    path.write_text(STATIC_FLEET.replace("{evil}", EVIL.replace("MARKER", str(marker))), encoding="utf-8")
    return path, marker


def test_classification_groups_and_addresses():
    instances = [
        instance(),
        instance(instance_id="i-0002", name="p4d-a", instance_type="p4d.24xlarge", placement=None),
        instance(instance_id="i-0003", name="web", instance_type="m5.large"),
        instance(instance_id="i-0004", name="g6-a", instance_type="g6.48xlarge"),
        instance(instance_id="i-0005", name="p5-stopped", state=fleet_base.STOPPED),
    ]
    inventory, warnings = fleet_inventory.build(instances, catalog)
    hosts = inventory["_meta"]["hostvars"]
    assert sorted(hosts) == ["g6-a", "p4d-a", "p5-a"]
    assert hosts["p5-a"]["gpufabric_profile"] == "aws/p5.48xlarge"
    assert hosts["p5-a"]["gpufabric_fabric"] == "efa"
    assert hosts["p5-a"]["ansible_host"] == "10.0.0.1"
    assert inventory["fabric_efa"]["hosts"] == ["p4d-a", "p5-a"]
    assert inventory["profile_aws_p5_48xlarge"]["hosts"] == ["p5-a"]
    assert inventory["placement_aws_pg_1"]["hosts"] == ["g6-a", "p5-a"]
    assert inventory["fabric_unknown"]["hosts"] == ["g6-a"]
    assert "gpufabric_profile" not in hosts["g6-a"]
    assert any("g6.48xlarge" in warning for warning in warnings)


def test_options_keep_non_gpu_stopped_and_public():
    instances = [instance(instance_id="i-3", name="web", instance_type="m5.large"), instance(state="stopped")]
    inventory, _warnings = fleet_inventory.build(
        instances, catalog, public=True, include_non_gpu=True, include_stopped=True
    )
    assert inventory["non_gpu"]["hosts"] == ["web"]
    assert inventory["_meta"]["hostvars"]["p5-a"]["ansible_host"] == "198.51.100.1"


def test_missing_public_address_falls_back_with_a_warning():
    inventory, warnings = fleet_inventory.build([instance(public_ip=None)], catalog, public=True)
    assert inventory["_meta"]["hostvars"]["p5-a"]["ansible_host"] == "10.0.0.1"
    assert warnings == ["aws i-0001 has no public address; using 10.0.0.1"]


def test_unsafe_names_become_safe_hostnames_and_group_names():
    evil = "{{ 7 * 7 }}; rm -rf /"
    inventory, _warnings = fleet_inventory.build([instance(name=evil, placement=evil)], catalog)
    (name,) = inventory["_meta"]["hostvars"]
    assert name == "i-0001"
    assert isinstance(inventory["_meta"]["hostvars"][name]["gpufabric_instance_name"], fleet_inventory.Unsafe)
    placement_groups = [group for group in inventory if group.startswith("placement_")]
    assert len(placement_groups) == 1
    assert placement_groups[0].startswith("placement_aws_")
    assert placement_groups[0].replace("_", "").isalnum(), "only letters, digits and underscores"


def test_duplicate_names_stay_distinct():
    inventory, _warnings = fleet_inventory.build([instance(), instance(instance_id="i-0002")], catalog)
    assert sorted(inventory["_meta"]["hostvars"]) == ["p5-a", "p5-a-i_0002"]


def test_json_is_exactly_what_ansible_inventory_lists_for_the_yaml(tmp_path, static_fleet, ansible_env, gpufabric):
    path, _marker = static_fleet
    as_json = gpufabric("inventory", "build", "--source", "static", "--file", str(path), "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    written = tmp_path / "fleet-inventory.yml"
    result = gpufabric("inventory", "build", "--source", "static", "--file", str(path), "-o", str(written))
    assert result.returncode == 0, result.stderr
    assert "3 hosts from static written to" in " ".join(result.stderr.split())
    listed = ansible_inventory(ansible_env, "-i", str(written), "--list")
    assert json.loads(as_json.stdout) == listing(listed.stdout)


def test_plugin_gives_the_same_hosts_groups_and_vars(tmp_path, static_fleet, ansible_env, gpufabric):
    path, _marker = static_fleet
    config = tmp_path / "fleet.gpu_fleet.yml"
    config.write_text(
        f"plugin: gpufabric.cluster.gpu_fleet\nsource: static\npath: {path.name}\n",
        encoding="utf-8",
    )
    from_plugin = ansible_inventory(ansible_env, "-i", str(config), "--list")
    from_cli = gpufabric("inventory", "build", "--source", "static", "--file", str(path), "--format", "json")
    plugin_view, cli_view = listing(from_plugin.stdout), json.loads(from_cli.stdout)
    tag = plugin_view["_meta"]["hostvars"]["hgx-01"]["gpufabric_tags"]["owner"]
    assert tag == {"__ansible_unsafe": EVIL.replace("MARKER", str(tmp_path / "pwned"))}
    # ansible-core 2.19 lists every value an inventory plugin sets as unsafe; compare the values themselves.
    assert unwrap(plugin_view) == unwrap(cli_view)


def test_plugin_keyed_groups_and_bad_source(tmp_path, static_fleet, ansible_env):
    path, _marker = static_fleet
    config = tmp_path / "fleet.gpu_fleet.yml"
    config.write_text(
        "plugin: gpufabric.cluster.gpu_fleet\nsource: static\n"
        f"path: {path.name}\nkeyed_groups:\n  - key: gpufabric_fabric\n    prefix: kg\n",
        encoding="utf-8",
    )
    graph = ansible_inventory(ansible_env, "-i", str(config), "--graph")
    assert "@kg_infiniband" in graph.stdout
    config.write_text("plugin: gpufabric.cluster.gpu_fleet\nsource: static\npath: absent.yml\n", encoding="utf-8")
    failed = ansible_inventory(
        {**ansible_env, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"}, "-i", str(config), "--list", check=False
    )
    assert failed.returncode != 0
    assert "absent.yml: file: cannot read" in failed.stderr


PLAY = """
- name: Use every variable the cloud controls
  hosts: all
  gather_facts: false
  tasks:
    - name: Print the owner tag
      ansible.builtin.debug:
        msg: "owner={{ gpufabric_tags.owner }}"
"""


@pytest.mark.parametrize("kind", ["built file", "plugin"])
def test_tags_are_never_templated(kind, tmp_path, static_fleet, ansible_env, gpufabric):
    path, marker = static_fleet
    if kind == "built file":
        inventory = tmp_path / "inventory.yml"
        gpufabric("inventory", "build", "--source", "static", "--file", str(path), "-o", str(inventory))
    else:
        inventory = tmp_path / "fleet.gpu_fleet.yml"
        inventory.write_text(
            f"plugin: gpufabric.cluster.gpu_fleet\nsource: static\npath: {path.name}\n",
            encoding="utf-8",
        )
    play = tmp_path / "play.yml"
    play.write_text(PLAY, encoding="utf-8")
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), str(play), "--limit", "hgx-01", "-c", "local"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "owner={{ lookup('pipe', 'touch" in result.stdout
    assert not marker.exists(), "a tag was templated"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hosts: [{name: a}]", "hosts[0] (a).address: missing required key"),
        ("hosts: [{name: a, address: x, colour: red}]", "hosts[0] (a).colour: unknown key"),
        ("hosts: [{name: a, address: x}, {name: a, address: y}]", "hosts[1] (a).name: 'a' is listed twice"),
        ("hosts: {a: 1}", "hosts: the file must be a mapping with a 'hosts:' list"),
        ("hosts: [\n", "not valid YAML"),
        ("hosts: []", "hosts: the list is empty"),
        ("hosts: [hgx-01]", "hosts[0]: 'hgx-01' is not a mapping"),
        ("hosts: [{name: a, address: x, profile: [p, q]}]", "hosts[0] (a).profile: ['p', 'q'] is not text"),
        (
            "hosts: [{name: a, address: x, vars: {gpufabric_profile: {p: 1}}}]",
            "hosts[0] (a).vars: host var gpufabric_profile {'p': 1} is a mapping, not text",
        ),
        ("hosts: [{name: 'a b', address: x}]", "hosts[0] (a b).name: 'a b' is not a host name"),
    ],
)
def test_static_file_errors(tmp_path, gpufabric, text, message):
    path = tmp_path / "fleet.yml"
    path.write_text(text, encoding="utf-8")
    output = tmp_path / "out.yml"
    result = gpufabric("inventory", "build", "--source", "static", "--file", str(path), "-o", str(output))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert message in " ".join(result.stderr.split())
    assert not output.exists(), "nothing written on failure"


def test_cli_rejects_flags_of_another_source(gpufabric):
    result = gpufabric("inventory", "build", "--source", "static", "--region", "us-east-1")
    assert result.returncode == 1
    assert "--region does not apply to --source static; it takes --file" in result.stderr


def test_plugin_cache_serves_the_fleet_and_keeps_unsafe_marks(tmp_path, static_fleet, ansible_env):
    path, _marker = static_fleet
    config = tmp_path / "fleet.gpu_fleet.yml"
    config.write_text(
        "plugin: gpufabric.cluster.gpu_fleet\nsource: static\n"
        f"path: {path.name}\ncache: true\ncache_plugin: ansible.builtin.jsonfile\n"
        f"cache_connection: {tmp_path / 'cache'}\ncache_timeout: 3600\n",
        encoding="utf-8",
    )
    first = ansible_inventory(ansible_env, "-i", str(config), "--list")
    path.unlink()  # the source is gone: only the cache can answer now
    second = ansible_inventory(ansible_env, "-i", str(config), "--list")
    assert json.loads(second.stdout) == json.loads(first.stdout)
    (cache_file,) = (tmp_path / "cache").iterdir()
    cached = json.loads(cache_file.read_text(encoding="utf-8"))
    cached = json.loads(cached["__payload__"]) if "__payload__" in cached else cached  # ansible-core 2.19 wraps it
    owner = cached["_meta"]["hostvars"]["hgx-01"]["gpufabric_tags"]["owner"]
    assert owner == {"__ansible_unsafe": EVIL.replace("MARKER", str(tmp_path / "pwned"))}


def test_markup_in_cloud_names_is_printed_as_text(tmp_path, gpufabric):
    path = tmp_path / "fleet.yml"
    path.write_text('hosts: [{name: a, address: 192.0.2.9, cloud: "[/red][bold]x"}]\n', encoding="utf-8")
    result = gpufabric("inventory", "build", "--source", "static", "--file", str(path))
    assert result.returncode == 0, result.stderr
    assert "[/red][bold]x" in result.stderr


def test_static_keeps_every_host_it_is_given():
    """A listed host the catalog cannot classify is in fabric_unknown with a warning naming it, never dropped."""
    hosts = [
        fleet_base.Instance("aws", "no-type", "no-type", "", fleet_base.RUNNING, gpu_host=True),
        fleet_base.Instance("onprem", "odd-cloud", "odd-cloud", "dgx", fleet_base.RUNNING, gpu_host=True),
        fleet_base.Instance("gcp", "cpu-type", "cpu-type", "n2-standard-8", fleet_base.RUNNING, gpu_host=True),
    ]
    inventory, warnings = fleet_inventory.build(hosts, catalog)
    warnings = [warning for warning in warnings if "fabric_unknown" in warning]  # not the missing-address ones
    assert inventory["fabric_unknown"]["hosts"] == ["cpu-type", "no-type", "odd-cloud"]
    assert [warning.split(" has ")[0] for warning in warnings] == [
        "aws instance no-type",
        "onprem instance odd-cloud",
        "gcp instance cpu-type",
    ]
    assert "cloud 'onprem', which no catalog profile has" in warnings[1]
    # The same types from a cloud API are not GPU hosts: left out as before (--include-non-gpu keeps them).
    cloud = [fleet_base.Instance("gcp", "vm", "vm", "n2-standard-8", fleet_base.RUNNING)]
    assert fleet_inventory.build(cloud, catalog)[0]["_meta"]["hostvars"] == {}


CLOUD_FIELDS = ("name", "instance_type", "region", "zone", "placement", "private_ip", "public_ip", "nvlink_domain")
EVERY_VALUE = """
- name: Use every variable a cloud answer reaches
  hosts: all
  gather_facts: false
  tasks:
    - name: Print them
      ansible.builtin.debug:
        msg: >-
          host={{ ansible_host }} name={{ gpufabric_instance_name }} type={{ gpufabric_instance_type }}
          region={{ gpufabric_region }} zone={{ gpufabric_zone }} placement={{ gpufabric_placement }}
          private={{ gpufabric_private_ip }} public={{ gpufabric_public_ip }} domain={{ gpufabric_nvlink_domain }}
          tags={{ gpufabric_tags }} ids={{ gpufabric_ids }} facts={{ gpufabric_source_facts }}
"""


def test_no_cloud_answer_is_ever_templated(tmp_path, ansible_env):
    """Every field a cloud answers (addresses too: an API, a proxy or an emulator can answer anything there) is
    written !unsafe: Ansible prints it as text and runs nothing (issue 42)."""

    def evil(field: str) -> str:
        return "{{ lookup('pipe', 'touch " + str(tmp_path / f"pwned-{field}") + "') }}"

    answer = instance(
        **{field: evil(field) for field in CLOUD_FIELDS},
        tags={evil("tag-key"): evil("tag")},
        ids={"project": evil("id")},
        extra={"efa_interfaces": evil("fact")},
    )
    inventory, _warnings = fleet_inventory.build([answer], catalog, include_non_gpu=True)
    ((host, variables),) = inventory["_meta"]["hostvars"].items()
    assert variables["ansible_host"] == evil("private_ip")
    written = tmp_path / "inventory.yml"
    written.write_text(fleet_inventory.to_yaml(inventory), encoding="utf-8")
    play = tmp_path / "play.yml"
    play.write_text(EVERY_VALUE, encoding="utf-8")
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(written), str(play), "-c", "local"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(path.name for path in tmp_path.glob("pwned-*")) == [], "a cloud answer was templated"
    for field in (*CLOUD_FIELDS, "tag-key", "tag", "id", "fact"):
        assert f"touch {tmp_path / f'pwned-{field}'}" in result.stdout, field
    assert host == "i-0001"


def test_plugin_takes_the_call_budget_from_the_environment(tmp_path, ansible_env):
    """cloud_timeout and cloud_retries (GPUFABRIC_CLOUD_TIMEOUT, GPUFABRIC_CLOUD_RETRIES) are checked before any
    call: a value out of range is one error naming the option and the variable."""
    config = tmp_path / "fleet.gpu_fleet.yml"
    config.write_text(
        "plugin: gpufabric.cluster.gpu_fleet\nsource: aws\nregions: [us-east-1]\nendpoint_url: http://127.0.0.1:9\n",
        encoding="utf-8",
    )
    env = {**ansible_env, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true", "GPUFABRIC_CLOUD_RETRIES": "11"}
    failed = ansible_inventory(env, "-i", str(config), "--list", check=False)
    assert failed.returncode != 0
    message = " ".join(failed.stderr.split())
    assert (
        "gpu_fleet: aws: cloud_retries (or GPUFABRIC_CLOUD_RETRIES) 11 is not accepted; accepted: retries from 0 to 10"
        in message
    ), message
