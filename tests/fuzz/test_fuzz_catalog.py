# SPDX-License-Identifier: Apache-2.0
"""Catalog files, static fleet files and `bake -e` values that are not what they claim: one clear error each.

The YAML-level faults (not UTF-8, binary, NUL, nested 70 deep, an alias bomb, over the size limit, a date
or integer Python cannot build) are refused by the one bounded loader (plugin_utils/bounded_yaml.py)
before or while parsing, never by a traceback or a hang. Catalog values that would reach files on hosts
(env keys and values, profile names, instance types, interface names) are refused at load time by the
catalog grammar (plugin_utils/fabric_catalog.py). Each error line names the file, and the line or the
key path. Nothing is written: `inventory build -o` leaves its target absent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fuzz.harness import Case, run

MAX_BYTES = 4 * 1024 * 1024  # plugin_utils/bounded_yaml.py MAX_BYTES
MEGA = "profiles:\n  gcp/a3-megagpu-8g:\n"


def billion_laughs(prefix: str) -> str:
    """`prefix` then nine levels of ten aliases each: about 10**9 strings if expanded."""
    lines = ['lol0: &lol0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        lines.append(f"lol{level}: &lol{level} [{', '.join([f'*lol{level - 1}'] * 10)}]")
    return prefix + "\n".join(lines) + "\n"


def file(name: str, content: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        data = content.encode("utf-8") if isinstance(content, str) else content
        (tmp / name).write_bytes(data)

    return setup


# The faults every YAML file gpufabric reads can have, as (id, content, what the error line says after the file).
YAML_FAULTS: list[tuple[str, str | bytes, str]] = [
    ("not-utf8", b"hosts:\n  - name: caf\xe9\n", "line 2, column 14: not UTF-8: byte 0xe9"),
    ("utf16", "hosts: []\n".encode("utf-16"), "line 1, column 1: not UTF-8: byte 0xff"),
    ("binary", b"\x7fELF\x02\x01\x01" + bytes(9), "line 1, column 1: binary content: control character U+007F"),
    ("nul", b"hosts: []\n\x00\n", "line 2, column 1: binary content: control character U+0000"),
    ("deep-70", "hosts: " + "[" * 70 + "]" * 70 + "\n", "line 1, column 71: nested deeper than 64 levels"),
    ("alias-bomb", billion_laughs(""), "line 6, column 63: more than 1,000,000 nodes with aliases expanded"),
    ("recursive-alias", "hosts: &h [*h]\n", "line 1, column 12: alias *h refers to its own anchor"),
    ("oversize", "# padding\n" * (MAX_BYTES // 10 + 1), "larger than 4,194,304 bytes"),
    (
        "bad-date",
        "hosts: []\nwhen: !!timestamp 2026-13-45\n",
        "line 2, column 7: not valid YAML: cannot read '2026-13-45'",
    ),
    ("huge-int", "hosts: []\nn: " + "9" * 5000 + "\n", "line 2, column 4: not valid YAML: cannot read '9999"),
]

CATALOG_FAULTS = [
    Case(
        f"catalog-list-{fault}",
        ("catalog", "list", "--catalog", "bad.yml"),
        # A fault with a line is the content's; one without (the size) is the file's, named as given with its origin.
        names=f"catalog error: bad.yml: {reason}"
        if reason.startswith("line")
        else f"catalog error: 'bad.yml' (--catalog): {reason}",
        setup=file("bad.yml", content),
    )
    for fault, content, reason in YAML_FAULTS
]

STATIC_FAULTS = [
    Case(
        f"inventory-static-{fault}",
        ("inventory", "build", "--source", "static", "--file", "fleet.yml", "-o", "out.yml"),
        # The static source says "file" where the loader has no line.
        names=f"static: fleet.yml: {reason if reason.startswith('line') else 'file: ' + reason}",
        setup=file("fleet.yml", content),
        untouched=("out.yml",),
    )
    for fault, content, reason in YAML_FAULTS
]

# Values that reach files on hosts (nccl.conf, profile.d, unit files, shell lists): the catalog grammar.
GRAMMAR = [
    Case(
        "catalog-env-key-newline",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="bad.yml: profiles.gcp/a3-megagpu-8g.tiers.best.env: key 'NCCL_DEBUG\\nLD_PRELOAD' holds a control",
        setup=file("bad.yml", MEGA + '    tiers: {best: {env: {"NCCL_DEBUG\\nLD_PRELOAD": WARN}}}\n'),
    ),
    Case(
        "catalog-env-value-control-character",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="bad.yml: profiles.gcp/a3-megagpu-8g.tiers.best.env.NCCL_DEBUG: value 'WARN\\x1b[2J' holds a control",
        setup=file("bad.yml", MEGA + '    tiers: {best: {env: {NCCL_DEBUG: "WARN\\e[2J"}}}\n'),
    ),
    Case(
        "catalog-env-value-newline",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="profiles.gcp/a3-megagpu-8g.tiers.best.env.NCCL_DEBUG: value 'WARN\\nNCCL_NET=Socket' holds",
        setup=file("bad.yml", MEGA + '    tiers: {best: {env: {NCCL_DEBUG: "WARN\\nNCCL_NET=Socket"}}}\n'),
    ),
    Case(
        "catalog-env-key-lowercase",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="variable name 'nccl_debug' must match ^[A-Z_][A-Z0-9_]*$",
        setup=file("bad.yml", MEGA + "    tiers: {best: {env: {nccl_debug: WARN}}}\n"),
    ),
    Case(
        "catalog-profile-name-semicolon",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="bad.yml: profiles.gcp/a3;reboot: is not a profile name; accepted: '<cloud>/<instance-type>'",
        setup=file("bad.yml", "profiles:\n  gcp/a3;reboot: {}\n"),
    ),
    Case(
        "catalog-profile-name-newline",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="bad.yml: profiles.'gcp/a3\\nbad': is not a profile name",
        setup=file("bad.yml", 'profiles:\n  "gcp/a3\\nbad": {}\n'),
    ),
    Case(
        "catalog-instance-type-command",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="profiles.gcp/a3-megagpu-8g.instance_type: 'a3$(reboot)' is not accepted",
        setup=file("bad.yml", MEGA + "    instance_type: a3$(reboot)\n"),
    ),
    Case(
        "catalog-interface-semicolon",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="nics.gpu.interfaces: unknown key; accepted: count, speed_gbit_s, kind, mtu, pci_ids, rdma_devices",
        setup=file("bad.yml", MEGA + "    nics: {gpu: {interfaces: [eth1, 'eth2;reboot']}}\n"),
    ),
    Case(
        "catalog-profile-twice-in-one-file",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="bad.yml: line 4, column 3: key 'gcp/a3-megagpu-8g' is given twice (first at line 2)",
        setup=file("bad.yml", MEGA + "    description: one\n" + MEGA.split("\n", 1)[1] + "    description: two\n"),
    ),
    Case(
        "catalog-description-bidi-override",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="profiles.gcp/a3-megagpu-8g.description: value '8x H100 \\u202e' holds RIGHT-TO-LEFT OVERRIDE",
        setup=file("bad.yml", MEGA + '    description: "8x H100 \\u202e"\n'),
    ),
]

# The fabric's rules (catalog/fabrics.yml), checked when the catalog loads rather than on the host.
FABRIC_RULES = [
    Case(
        "catalog-efa-profile-runs-tcpxo",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="bad.yml: profiles.aws/p5.48xlarge.tiers.best.roles: names gcp_tcpxo, the role of fabric tcpxo; "
        "a profile of fabric efa cannot run it",
        setup=file("bad.yml", "profiles:\n  aws/p5.48xlarge:\n    tiers: {best: {roles: [fabric_facts, gcp_tcpxo]}}\n"),
    ),
    Case(
        "catalog-efa-provider",
        ("catalog", "show", "aws/p5.48xlarge", "--catalog", "bad.yml"),
        names="bad.yml: profiles.aws/p5.48xlarge.tiers.best.env.FI_PROVIDER: FI_PROVIDER 'sockets' is not accepted "
        "by fabric efa; accepted: efa",
        setup=file("bad.yml", "profiles:\n  aws/p5.48xlarge:\n    tiers: {best: {env: {FI_PROVIDER: sockets}}}\n"),
    ),
    Case(
        "catalog-tcpxo-guest-config",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="bad.yml: profiles.gcp/a3-megagpu-8g.tiers.best.env: the catalog env of gcp/a3-megagpu-8g has "
        "NCCL_NVLSTREE_MAX_CHUNKSIZE=65536; Google's guest-config checker enforces 131072",
        setup=file("bad.yml", MEGA + '    tiers: {best: {env: {NCCL_NVLSTREE_MAX_CHUNKSIZE: "65536"}}}\n'),
    ),
    Case(
        "plan-fabric-override-breaks-its-rule",
        ("plan", "-i", "localhost,", "--catalog", "bad.yml"),
        names="bad.yml: profiles.azure/Standard_ND96isr_H100_v5.tiers.best.env.NCCL_IB_DISABLE: "
        "NCCL_IB_DISABLE is set ('1'); fabric infiniband forbids it",
        setup=file("bad.yml", 'fabrics:\n  infiniband:\n    tiers: {best: {env: {NCCL_IB_DISABLE: "1"}}}\n'),
    ),
    Case(
        "catalog-fabric-unknown",
        ("catalog", "list", "--catalog", "bad.yml"),
        names="bad.yml: fabrics.warp: is not a fabric; accepted: tcpx, tcpxo, gpudirect_rdma",
        setup=file("bad.yml", "fabrics:\n  warp: {}\n"),
    ),
]

# The other commands that read a catalog, and the other YAML gpufabric reads (bake -e).
OTHER = [
    Case(
        "plan-catalog-alias-bomb",
        ("plan", "-i", "localhost,", "--catalog", "bad.yml"),
        names="catalog error: bad.yml: line 6, column 63: more than 1,000,000 nodes with aliases expanded",
        setup=file("bad.yml", billion_laughs("")),
    ),
    Case(
        "plan-catalog-env-value-control-character",
        ("plan", "-i", "localhost,", "--catalog", "bad.yml"),
        names="bad.yml: profiles.gcp/a3-megagpu-8g.tiers.best.env.NCCL_DEBUG: value 'WARN\\rINFO' holds",
        setup=file("bad.yml", MEGA + '    tiers: {best: {env: {NCCL_DEBUG: "WARN\\rINFO"}}}\n'),
    ),
    Case(
        "plan-catalog-not-utf8",
        ("plan", "-i", "localhost,", "--catalog", "bad.yml"),
        names="catalog error: bad.yml: line 3, column 21: not UTF-8: byte 0xe9",
        setup=file("bad.yml", MEGA.encode() + b"    description: caf\xe9\n"),
    ),
    Case(
        "catalog-env-var-binary",
        ("catalog", "list"),
        names="catalog error: bad.yml: line 1, column 1: binary content",
        setup=file("bad.yml", b"\x00\x01\x02"),
        env={"GPUFABRIC_CATALOG": "bad.yml"},
    ),
    Case(
        "bake-extra-vars-file-alias-bomb",
        ("bake", "--profile", "gcp/a3-megagpu-8g", "--tag", "localhost/x:1", "-e", "@vars.yml"),
        names="-e @vars.yml: cannot read a YAML mapping: vars.yml: line 6, column 63: more than 1,000,000 nodes",
        setup=file("vars.yml", billion_laughs("")),
    ),
    Case(
        "bake-extra-vars-value-deep",
        # KEY=VALUE is a string to ansible-playbook; a value that starts with [ or { is YAML.
        ("bake", "--profile", "gcp/a3-megagpu-8g", "--tag", "localhost/x:1", "-e", "[" * 70 + "]" * 70),
        names="-e: line 1, column 65: nested deeper than 64 levels",
    ),
]

CASES = [*CATALOG_FAULTS, *STATIC_FAULTS, *GRAMMAR, *FABRIC_RULES, *OTHER]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    run(case, tmp_path)
