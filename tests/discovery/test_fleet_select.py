# SPDX-License-Identifier: Apache-2.0
"""The gpu_fleet plugin's filters, include_filters, exclude_filters and hostnames (plugin_utils/fleet_select),
on instances made here; tests/discovery/test_inventory_cli_aws.py runs them through the plugin against moto."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from discovery.test_inventory_build import catalog, instance
from gpufabric.collection import plugin_utils

fleet_inventory = plugin_utils("fleet_inventory")
fleet_select = plugin_utils("fleet_select")
BIN = Path(sys.executable).parent

FLEET = [
    instance(instance_id="i-1", name="p5-a", tags={"team": "training"}),
    instance(instance_id="i-2", name="p5-b", tags={"team": "research"}, zone="us-east-1b"),
    instance(instance_id="i-3", name="p4d-a", instance_type="p4d.24xlarge", tags={"owner": "ops"}),
    instance(instance_id="i-4", name="p4d-b", instance_type="p4d.24xlarge", private_ip=None),
]


def names(instances):
    return [item.name for item in instances]


@pytest.mark.parametrize(
    ("filters", "include", "exclude", "kept"),
    [
        ({}, [], [], ["p5-a", "p5-b", "p4d-a", "p4d-b"]),
        ({"instance_type": "p5.*"}, [], [], ["p5-a", "p5-b"]),
        # Every key must match; any pattern of a key may.
        ({"instance_type": "p5.*", "zone": ["us-east-1a", "eu-*"]}, [], [], ["p5-a"]),
        ({"tag:team": ["training", "research"]}, [], [], ["p5-a", "p5-b"]),
        # A missing tag or field matches no pattern, not even "*".
        ({"tag:owner": "*"}, [], [], ["p4d-a"]),
        ({"private_ip": "*"}, [], [], ["p5-a", "p5-b", "p4d-a"]),
        # include_filters add to what filters keep; exclude_filters win over both.
        ({"instance_type": "p5.*"}, [{"tag:owner": "ops"}], [], ["p5-a", "p5-b", "p4d-a"]),
        ({"instance_type": "p5.*"}, [{"tag:owner": "ops"}], [{"name": "p4d-*"}, {"tag:team": "research"}], ["p5-a"]),
        # Patterns are case-sensitive, like EC2's filters; state is lower case.
        ({"name": "P5-*"}, [], [], []),
        ({"state": "running"}, [], [], ["p5-a", "p5-b", "p4d-a", "p4d-b"]),
    ],
)
def test_select_keeps_what_aws_ec2_would(filters, include, exclude, kept):
    assert names(fleet_select.select(FLEET, filters, include, exclude)) == kept


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (({"colour": "red"},), "filters: unknown key 'colour'; accepted: name, instance_id, instance_type, state"),
        (({"tag:": "x"},), "filters: unknown key 'tag:'"),
        (({"name": {"a": 1}},), "filters.name: {'a': 1} is not a pattern or a list of patterns"),
        (({"name": []},), "filters.name: [] is not a pattern"),
        (({"name": [True]},), "filters.name: [True] is not a pattern"),
        (({}, ["p5"]), "include_filters[0]: 'p5' is not a mapping"),
        (({}, [], [{}, {"zone ": "a"}]), "exclude_filters[1]: unknown key 'zone '"),
    ],
)
def test_a_bad_filter_names_itself(arguments, message):
    with pytest.raises(fleet_select.SelectionError) as raised:
        fleet_select.select(FLEET, *arguments)
    assert message in str(raised.value)


def test_hostnames_take_the_first_preference_that_gives_a_name():
    preferences = fleet_select.check_hostnames(
        [{"name": "instance_id", "prefix": "tag:owner", "separator": "-"}, "tag:team", "private_ip"]
    )
    fleet = [*FLEET, instance(instance_id="i-5", name="p5-c")]
    inventory, warnings = fleet_inventory.build(fleet, catalog, hostnames=preferences)
    named = {host: variables["gpufabric_instance_id"] for host, variables in inventory["_meta"]["hostvars"].items()}
    # p4d-b has no owner, no team and no private address: it keeps its own name, with a warning.
    assert named == {"training": "i-1", "research": "i-2", "ops-i-3": "i-3", "p4d-b": "i-4", "10.0.0.1": "i-5"}
    assert "aws instance i-4: no hostnames preference gives it a value; named as without hostnames" in warnings


def test_an_instance_no_preference_names_keeps_its_usual_name():
    preferences = fleet_select.check_hostnames(["tag:Name", {"name": "tag:team"}])
    fleet = [instance(instance_id="i-9", name="p5-z"), instance(instance_id="i-8", name="p5-y", tags={"team": "a b"})]
    inventory, warnings = fleet_inventory.build(fleet, catalog, hostnames=preferences)
    assert sorted(inventory["_meta"]["hostvars"]) == ["p5-y", "p5-z"]
    assert warnings == [
        "aws instance i-9: no hostnames preference gives it a value; named as without hostnames",
        "aws instance i-8: 'a b' is not a host name; named as without hostnames",
    ]


@pytest.mark.parametrize(
    ("preferences", "message"),
    [
        ([{"prefix": "zone"}], "hostnames[0]: {'prefix': 'zone'} is not a key nor a mapping with 'name'"),
        ([3], "hostnames[0]: 3 is not a key nor a mapping"),
        (["name", {"name": "dns_name"}], "hostnames[1].name: unknown key 'dns_name'"),
        ([{"name": "name", "prefix": "tags"}], "hostnames[0].prefix: unknown key 'tags'"),
        ([{"name": "name", "separator": 1}], "hostnames[0].separator: 1 is not text"),
    ],
)
def test_a_bad_hostnames_entry_names_itself(preferences, message):
    with pytest.raises(fleet_select.SelectionError) as raised:
        fleet_select.check_hostnames(preferences)
    assert message in str(raised.value)


def test_ansible_doc_documents_every_option_and_the_examples_use_only_those(ansible_env):
    result = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "inventory", "--json", "gpufabric.cluster.gpu_fleet"],
        capture_output=True,
        text=True,
        env=ansible_env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (doc,) = json.loads(result.stdout).values()
    options = doc["doc"]["options"]
    typed = {option for table in plugin_utils("fleet_sources").PLUGIN_SETTINGS.values() for option in table}
    for name in [*typed, "filters", "include_filters", "exclude_filters", "hostnames"]:
        assert options[name]["type"] in ("list", "dict", "str"), name
        description = options[name]["description"]
        assert description and all(isinstance(line, str) for line in description), name
    assert options["regions"]["elements"] == "str" and options["include_filters"]["elements"] == "dict"
    accepted = {*options, *(alias for option in options.values() for alias in option.get("aliases", []))}
    examples = list(yaml.safe_load_all(doc["examples"]))
    assert len(examples) == 3
    for example in examples:
        assert set(example) <= accepted, set(example) - accepted
        fleet_select.select([], example.get("filters"), example.get("include_filters"), example.get("exclude_filters"))
        fleet_select.check_hostnames(example.get("hostnames"))
        source = example["source"]
        assert set(example) & typed <= set(plugin_utils("fleet_sources").PLUGIN_SETTINGS[source]) | {"endpoint"}
