# SPDX-License-Identifier: Apache-2.0
"""NVLink domains: rack-scale hosts grouped by gpufabric_nvlink_domain, with one finding per fault."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from gpufabric.collection import _import_plugins, plugin_utils

nvlink_domains = plugin_utils("nvlink_domains")

NVL72 = "gcp/a4x-highgpu-4g"


def host(domain: str | None = None, profile: str = NVL72, hosts_per_domain: int | None = 18) -> dict:
    """A host plan as fabric_plan.plan_host makes it, reduced to what the grouping reads."""
    nvlink = (
        None
        if hosts_per_domain is None
        else {"domain": domain, "domain_gpus": 4 * hosts_per_domain, "hosts_per_domain": hosts_per_domain}
    )
    return {"profile": profile, "gpus": {"count": 4}, "nvlink": nvlink, "unmanaged": None}


def messages(result: dict) -> list[tuple[str, str]]:
    found = [*result["findings"], *(f for entry in result["domains"].values() for f in entry["findings"])]
    return [(finding["severity"], finding["message"]) for finding in found]


def test_a_whole_domain_has_its_members_and_no_finding():
    plans = {f"rack1-{index:02d}": host("rack1") for index in range(18)}
    result = nvlink_domains.group(plans)
    entry = result["domains"]["rack1"]
    assert entry["members"] == sorted(plans)
    assert entry["profiles"] == [NVL72] and entry["gpus"] == 72 and entry["hosts_per_domain"] == 18
    assert messages(result) == []
    assert not nvlink_domains.has_errors(result)


def test_a_partial_domain_is_a_warning_and_an_overfull_one_an_error():
    plans = {f"a{index}": host("a") for index in range(2)} | {f"b{index:02d}": host("b") for index in range(19)}
    result = nvlink_domains.group(plans)
    assert messages(result) == [
        ("warning", "domain a has 2 of its 18 hosts: IMEX and multi-node NVLink span only these"),
        (
            "error",
            f"domain b has 19 hosts, more than the 18 one NVLink domain of {NVL72} holds: the inventory puts "
            "hosts of two domains under one name",
        ),
    ]
    assert nvlink_domains.has_errors(result)


def test_mixed_profiles_in_one_domain_are_an_error():
    result = nvlink_domains.group({"x": host("r"), "y": host("r", profile="aws/p6e-gb200.36xlarge")})
    assert messages(result) == [
        ("error", f"domain r mixes profiles {NVL72}, aws/p6e-gb200.36xlarge; one NVLink domain is one kind of host")
    ]


def test_an_nvlink_host_without_a_domain_is_an_error():
    result = nvlink_domains.group({"h": host(None)})
    assert result["domains"] == {}
    assert messages(result) == [
        (
            "error",
            f"h: profile {NVL72} spans NVLink domains of 18 hosts, but the host names none; accepted: host var "
            "gpufabric_nvlink_domain (the rack or NVLink domain id)",
        )
    ]


def test_hosts_left_alone_take_no_part():
    plan = host(None) | {"unmanaged": {"code": "excluded", "reason": "excluded on purpose"}}
    assert nvlink_domains.group({"h": plan}) == {"domains": {}, "findings": []}


def test_nvlink_members_lists_each_domains_addresses_from_the_whole_inventory():
    """The imex role's nodes: every inventory host naming a domain, by ansible_host or name, in host-name order."""
    nvlink_members = _import_plugins("filter", "nvlink_members").nvlink_members
    hostvars = {
        "gb-b": {"gpufabric_nvlink_domain": "rack0", "ansible_host": "10.0.0.2"},
        "gb-a": {"gpufabric_nvlink_domain": "rack0"},
        "gb-c": {"gpufabric_nvlink_domain": "rack1", "ansible_host": "10.0.1.1"},
        "h100": {"ansible_host": "10.0.9.9"},
    }
    assert nvlink_members(list(hostvars), hostvars) == {"rack0": ["gb-a", "10.0.0.2"], "rack1": ["10.0.1.1"]}
    with pytest.raises(AnsibleFilterError, match="must be a list of host names, got str"):
        nvlink_members("gb-a", hostvars)
