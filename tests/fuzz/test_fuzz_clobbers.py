# SPDX-License-Identifier: Apache-2.0
"""An output that is the same file as an input, or as another output of the same run, is refused before
any work (output_file.refuse_clobbers), and every file is left as it was: compared as files, so a
symbolic link, a hard link or a relative name of the same file is caught too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fuzz.harness import Case, run

FLEET = "hosts:\n  - name: gpu-1\n    address: 10.0.0.1\n    profile: aws/p5.48xlarge\n"
INVENTORY = "all:\n  hosts:\n    gpu-1:\n      ansible_host: 10.0.0.1\n"


def _files(tmp: Path) -> None:
    (tmp / "fleet.yml").write_text(FLEET)
    (tmp / "inv.yml").write_text(INVENTORY)
    (tmp / "vars.yml").write_text("site: a\n")
    (tmp / "overrides.yml").write_text("profiles: {}\n")
    (tmp / "report").write_text("an earlier report\n")


def _linked(tmp: Path) -> None:
    _files(tmp)
    (tmp / "link.yml").symlink_to(tmp / "inv.yml")
    os.link(tmp / "fleet.yml", tmp / "hard.yml")


def _results(tmp: Path) -> None:
    """An earlier verify's directory, whose report.json a user then takes for an input."""
    _files(tmp)
    (tmp / "out").mkdir()
    (tmp / "out" / "report.json").write_text(INVENTORY)
    (tmp / "out" / "busbw.png").write_text("profiles: {}\n")


def _manifests(tmp: Path) -> None:
    """An earlier k8s manifests directory (its marker lists what it wrote), one of its files taken for an input."""
    _files(tmp)
    (tmp / "k8s").mkdir()
    (tmp / "k8s" / "inv.yml").write_text(INVENTORY)
    (tmp / "k8s" / ".gpufabric-manifests").write_text("# Files `gpufabric k8s manifests` wrote here\ninv.yml\n")
    (tmp / "empty").mkdir()


KEPT = ("fleet.yml", "inv.yml", "vars.yml", "overrides.yml", "report")
RESULTS = (*KEPT, "out", "out/report.json", "out/busbw.png")
MANIFESTS = (*KEPT, "k8s", "k8s/inv.yml", "k8s/.gpufabric-manifests", "empty")
DRIFT = ("drift", "-i", "inv.yml")
BUILD = ("inventory", "build", "--source", "static", "--file", "fleet.yml")
CASES = [
    Case(
        "inventory-build-o-is-file",
        (*BUILD, "-o", "fleet.yml"),
        names="-o and --file name the same file (fleet.yml)",
        setup=_files,
        untouched=KEPT,
    ),
    Case(
        "inventory-build-o-hard-link-to-file",
        (*BUILD, "-o", "{tmp}/hard.yml"),
        names="-o and --file name the same file ({tmp}/hard.yml and fleet.yml)",
        setup=_linked,
        untouched=(*KEPT, "hard.yml"),
    ),
    Case(
        "inventory-build-o-is-catalog",
        (*BUILD, "--catalog", "overrides.yml", "-o", "overrides.yml"),
        names="-o and --catalog name the same file (overrides.yml)",
        setup=_files,
        untouched=KEPT,
    ),
    Case(
        "inventory-build-o-is-env-catalog",
        (*BUILD, "-o", "{tmp}/overrides.yml"),
        names="-o and GPUFABRIC_CATALOG name the same file",
        setup=_files,
        untouched=KEPT,
        env={"GPUFABRIC_CATALOG": "{tmp}/overrides.yml"},
    ),
    Case(
        "verify-o-report-is-inventory",
        ("verify", "-i", "out/report.json", "-o", "out"),
        names="-o and -i name the same file (out/report.json)",
        setup=_results,
        untouched=RESULTS,
    ),
    Case(
        "verify-o-plot-is-catalog",
        ("verify", "-i", "inv.yml", "--catalog", "{tmp}/out/busbw.png", "-o", "out"),
        names="-o and --catalog name the same file (out/busbw.png and {tmp}/out/busbw.png)",
        setup=_results,
        untouched=RESULTS,
    ),
    Case(
        "verify-o-report-is-extra-vars-file",
        ("verify", "-i", "inv.yml", "-e", "@out/report.json", "-o", "out/"),
        names="-o and -e name the same file (out/report.json and {tmp}/out/report.json)",
        setup=_results,
        untouched=RESULTS,
    ),
    Case(
        "k8s-manifests-o-holds-inventory",
        ("k8s", "manifests", "-i", "k8s/inv.yml", "-o", "k8s", "--force"),
        names="-o k8s holds -i k8s/inv.yml, which the run reads; gpufabric replaces k8s whole",
        setup=_manifests,
        untouched=MANIFESTS,
    ),
    Case(
        "k8s-manifests-o-is-inventory-directory",
        ("k8s", "manifests", "-i", "empty", "-o", "{tmp}/empty"),
        names="-o {tmp}/empty holds -i empty, which the run reads",
        setup=_manifests,
        untouched=MANIFESTS,
    ),
    Case(
        "k8s-manifests-o-holds-catalog",
        ("k8s", "manifests", "-i", "inv.yml", "--catalog", "k8s/inv.yml", "-o", "k8s", "--force"),
        names="-o k8s holds --catalog k8s/inv.yml",
        setup=_manifests,
        untouched=MANIFESTS,
    ),
    Case(
        "drift-json-file-is-inventory",
        (*DRIFT, "--json-file", "inv.yml"),
        names="--json-file and -i name the same file (inv.yml)",
        setup=_files,
        untouched=KEPT,
    ),
    Case(
        "drift-junit-through-a-link-to-inventory",
        ("drift", "-i", "link.yml", "--junit", "./inv.yml"),
        names="--junit and -i name the same file (inv.yml and link.yml)",
        setup=_linked,
        untouched=(*KEPT, "link.yml"),
    ),
    Case(
        "drift-json-file-is-junit",
        (*DRIFT, "--json-file", "report", "--junit", "report"),
        names="--junit and --json-file name the same file (report)",
        setup=_files,
        untouched=KEPT,
    ),
    Case(
        "drift-absent-prom-is-json-file",
        (*DRIFT, "--json-file", "new.json", "--prom", "{tmp}/new.json"),
        names="--prom and --json-file name the same file ({tmp}/new.json and new.json)",
        setup=_files,
        untouched=(*KEPT, "new.json"),
    ),
    Case(
        "drift-prom-is-extra-vars-file",
        (*DRIFT, "-e", "@vars.yml", "--prom", "vars.yml"),
        names="--prom and -e name the same file",
        setup=_files,
        untouched=KEPT,
    ),
    Case(
        "drift-json-file-is-vault-password-file",
        (*DRIFT, "--vault-password-file", "report", "--json-file", "report"),
        names="--json-file and --vault-password-file name the same file",
        setup=_files,
        untouched=KEPT,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_output_clobbers_an_input(case: Case, tmp_path: Path) -> None:
    run(case, tmp_path)
