# SPDX-License-Identifier: Apache-2.0
"""What keeps `gpufabric plan` fast on a large fleet gives the same answer as computing every host on its own: the
supply memo (supply.host_supply) and the JSON writer (plan.plan_json). Speed is measured by bench/plan_scale.py."""

from __future__ import annotations

import json

import pytest

from gpufabric import supply
from gpufabric.collection import plugin_utils
from gpufabric.plan import plan_json

fabric_plan = plugin_utils("fabric_plan")
NVL72 = {"gpufabric_profile": "gcp/a4x-highgpu-4g", "gpufabric_os": "ubuntu-24.04"}


@pytest.fixture(scope="module")
def catalog():
    return plugin_utils("fabric_catalog").load_catalog()


def _supply(hostvars, catalog, memo=None):
    host_plan = fabric_plan.plan_host(hostvars, catalog)
    facts, os_name, where = supply.host_facts(hostvars, None, host_plan["image"])
    return supply.host_supply(host_plan, hostvars, facts, os_name, where, memo)


def test_hosts_alike_share_one_supply_and_it_is_what_each_computes_alone(catalog):
    """NVL72 hosts differ in their NVLink domain, which no role's supply reads: one computation serves them all, and
    it equals each host's own (the plan filters and the templates the settings reach never read plan.nvlink)."""
    first, second = {**NVL72, "gpufabric_nvlink_domain": "rack-1"}, {**NVL72, "gpufabric_nvlink_domain": "rack-2"}
    alone = _supply(second, catalog)
    assert _supply(first, catalog) == alone
    memo: dict = {}
    shared = [_supply(first, catalog, memo), _supply(second, catalog, memo)]
    assert len(memo) == 1 and shared[1] == alone and shared[0]["roles"] is shared[1]["roles"]
    assert alone["roles"], "the NVL72 profile's roles install packages on ubuntu-24.04"


def test_a_host_variable_the_roles_read_is_part_of_the_key(catalog):
    memo: dict = {}
    plain = _supply(NVL72, catalog, memo)
    pinned = _supply({**NVL72, "rdma_stack_provision": "none"}, catalog, memo)
    assert len(memo) == 2 and plain != pinned
    # A variable no template reaches (every host has its own address) is not.
    _supply({**NVL72, "ansible_host": "192.0.2.7"}, catalog, memo)
    assert len(memo) == 2


@pytest.mark.parametrize(
    ("template", "names"),
    [
        ("{{ a | default(b) }}", {"a", "b"}),
        ("{{ hostvars[inventory_hostname].x_provision | default('y') }}", {"x_provision", "inventory_hostname"}),
        ("{{ hostvars[inventory_hostname]['x'] }}", {"x", "inventory_hostname"}),
        ("{{ hostvars['other'].x }}", {"*"}),
        ("{{ lookup('env', 'HOME') }}", {"*"}),
        ("{{ vars['a' ~ b] }}", {"*", "b"}),
        ("{{ [1, 2] | random }}", {"*"}),
        ("{% include 'x.j2' %}", {"*"}),
        ("{{ unclosed", {"*"}),
    ],
)
def test_the_names_a_template_can_reach(template, names):
    """More names than needed only costs a memo miss; "*" (no memo) where names cannot bound what a template reads."""
    assert names <= supply._template_names(template)
    assert ("*" in supply._template_names(template)) == ("*" in names)


def test_unsafe_inventory_text_reaches_no_name():
    assert supply._template_names({"__ansible_unsafe": "{{ lookup('pipe', 'id') }}"}) == frozenset()


@pytest.mark.parametrize(
    "plan",
    [
        {},
        {"hosts": {}, "nvlink": {"domains": {}, "findings": []}},
        {"hosts": {"a": {}, "b": {"env": {}, "roles": [], "x": [1, {"y": "line\nbreak"}], "n": None}}, "z": [1.5]},
        {"hosts": {"h\u00e9": {"supply": {"roles": {"r": [{"k": "\u2028"}]}}}}},
    ],
)
def test_plan_json_is_the_text_of_json_dumps(plan):
    assert plan_json(plan) == json.dumps(plan, indent=2)
