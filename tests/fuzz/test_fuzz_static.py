# SPDX-License-Identifier: Apache-2.0
"""`gpufabric inventory build --source static`: every host given is kept or refused by name, never dropped.

A host the catalog cannot classify (no GPU type, an unknown cloud, a type it does not know) lands in
fabric_unknown with a warning naming it; a host entry that is not a mapping, a key of the wrong type, a name
listed twice, a bad name or an empty file is one error naming the file, the entry and the key; no output
file is written then.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fuzz.harness import Case, Result, run

FILE = "fleet.yml"
BUILD = ("inventory", "build", "--source", "static", "--file", FILE, "-o", "out.json", "--format", "json")


def fleet(text: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / FILE).write_text(text, encoding="utf-8")

    return setup


def kept_unknown(host: str, warning: str) -> Callable[[Result], None]:
    """The host is in the inventory, in fabric_unknown, and one warning names it and why."""

    def expect(result: Result) -> None:
        inventory = json.loads((result.tmp / "out.json").read_text(encoding="utf-8"))
        assert host in inventory["_meta"]["hostvars"], inventory
        assert host in inventory["fabric_unknown"]["hosts"], inventory
        warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
        assert any(f"instance {host} has {warning}" in line for line in warnings), result.stderr

    return expect


def kept(result: Result) -> None:
    inventory = json.loads((result.tmp / "out.json").read_text(encoding="utf-8"))
    assert sorted(inventory["_meta"]["hostvars"]) == ["42", "a", "b"], inventory


def unknown_profile(result: Result) -> None:
    inventory = json.loads((result.tmp / "out.json").read_text(encoding="utf-8"))
    assert inventory["fabric_unknown"]["hosts"] == ["p"], inventory
    assert "warning: p: profile 'baremetal/typo' is not in the catalog; in fabric_unknown" in result.stderr


GOOD = "  - {name: a, address: 192.0.2.1, profile: baremetal/hgx-h100-ib-ndr}\n"

CASES = [
    Case(
        "no-gpu-type",
        BUILD,
        exit_code=0,
        error_line=False,
        setup=fleet("hosts:\n" + GOOD + "  - {name: cpu-less, address: 192.0.2.2, cloud: aws}\n"),
        expect=kept_unknown("cpu-less", "no profile or instance type"),
    ),
    Case(
        "unknown-cloud",
        BUILD,
        exit_code=0,
        error_line=False,
        setup=fleet("hosts:\n" + GOOD + "  - {name: odd, address: 192.0.2.2, cloud: onprem, instance_type: dgx}\n"),
        expect=kept_unknown("odd", "cloud 'onprem', which no catalog profile has"),
    ),
    Case(
        "type-not-gpu-by-name",
        BUILD,
        exit_code=0,
        error_line=False,
        setup=fleet(
            "hosts:\n" + GOOD + "  - {name: n2, address: 192.0.2.2, cloud: gcp, instance_type: n2-standard-8}\n"
        ),
        expect=kept_unknown("n2", "instance type 'n2-standard-8', which the catalog does not know"),
    ),
    Case(
        "unknown-profile",
        BUILD,
        exit_code=0,
        error_line=False,
        setup=fleet("hosts:\n  - {name: p, address: 192.0.2.2, profile: baremetal/typo}\n"),
        expect=unknown_profile,
    ),
    Case(
        "numbers-as-names-and-every-host-kept",
        BUILD,
        exit_code=0,
        error_line=False,
        setup=fleet(
            "hosts:\n" + GOOD + "  - {name: b, address: 192.0.2.2}\n  - {name: 42, address: host-42.example}\n"
        ),
        expect=kept,
    ),
    Case(
        "entry-is-a-list",
        BUILD,
        names="fleet.yml: hosts[1]: ['b', '192.0.2.2'] is not a mapping",
        setup=fleet("hosts:\n" + GOOD + "  - [b, 192.0.2.2]\n"),
        untouched=("out.json",),
    ),
    Case(
        "entry-is-an-int",
        BUILD,
        names="fleet.yml: hosts[0]: 7 is not a mapping",
        setup=fleet("hosts: [7]\n"),
        untouched=("out.json",),
    ),
    Case(
        "entry-is-a-string",
        BUILD,
        names="fleet.yml: hosts[0]: 'hgx-01' is not a mapping",
        setup=fleet("hosts: [hgx-01]\n"),
        untouched=("out.json",),
    ),
    Case(
        "duplicate-names",
        BUILD,
        names="hosts[1] (a).name: 'a' is listed twice",
        setup=fleet("hosts:\n" + GOOD + GOOD),
        untouched=("out.json",),
    ),
    Case(
        "empty-file",
        BUILD,
        names="fleet.yml: hosts: the file must be a mapping with a 'hosts:' list",
        setup=fleet(""),
        untouched=("out.json",),
    ),
    Case(
        "empty-host-list",
        BUILD,
        names="fleet.yml: hosts: the list is empty",
        setup=fleet("hosts: []\n"),
        untouched=("out.json",),
    ),
    Case(
        "profile-is-a-list",
        BUILD,
        names="hosts[0] (a).profile: ['baremetal/hgx-h100-ib-ndr'] is not text",
        setup=fleet("hosts:\n  - {name: a, address: 192.0.2.1, profile: [baremetal/hgx-h100-ib-ndr]}\n"),
        untouched=("out.json",),
    ),
    Case(
        "cloud-is-a-mapping",
        BUILD,
        names="hosts[0] (a).cloud: {'aws': 1} is not text",
        setup=fleet("hosts:\n  - {name: a, address: 192.0.2.1, cloud: {aws: 1}}\n"),
        untouched=("out.json",),
    ),
    Case(
        "vars-profile-is-a-mapping",
        BUILD,
        names="hosts[0] (a).vars: host var gpufabric_profile {'x': 1} is a mapping, not text",
        setup=fleet("hosts:\n  - {name: a, address: 192.0.2.1, vars: {gpufabric_profile: {x: 1}}}\n"),
        untouched=("out.json",),
    ),
    Case(
        "name-not-a-host-name",
        BUILD,
        names="hosts[0] (gpu 01).name: 'gpu 01' is not a host name",
        setup=fleet("hosts:\n  - {name: gpu 01, address: 192.0.2.1}\n"),
        untouched=("out.json",),
    ),
    Case(
        "name-is-a-mapping",
        BUILD,
        names="hosts[0].name: {'a': 1} is not text",
        setup=fleet("hosts:\n  - {name: {a: 1}, address: 192.0.2.1}\n"),
        untouched=("out.json",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_static_source(case: Case, tmp_path: Path) -> None:
    run(case, tmp_path)
