# SPDX-License-Identifier: Apache-2.0
"""Write a scenario's SIMULATED sysfs trees on the controller, anew at every create.

    write_trees.py '[{"dir": DIR, "profile": NAME, "faults": {...}, "sriov_totalvfs": N,
                     "nic_names_image": IMAGE}, ...]'

Each entry: the catalog profile whose hardware the tree has, written into DIR (removed first: molecule keeps its
ephemeral directory between runs, so a tree left there is an earlier run's); optional ``faults`` (the fields of
gpufabric.simulated_hw.Faults, pairs as JSON lists) and ``sriov_totalvfs``, as simulated_hw.write_tree takes them,
and ``nic_names_image``: the image whose NIC names (tests/fixtures/nic_names.yml, with their sources) the tree's
NICs carry; without it, the kernel's names.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from gpufabric.collection import plugin_utils
from gpufabric.simulated_hw import Faults, write_tree

NIC_NAMES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "nic_names.yml"
GROUPS = ("gpu", "management", "gpu_rdma")


def faults(given: dict[str, Any]) -> Faults:
    """Faults from JSON, where a pair or a list of module names is a list."""
    return Faults(**{key: tuple(value) if isinstance(value, list) else value for key, value in given.items()})


def nic_names(profile: str, image: str | None) -> dict[str, list[str]] | None:
    """The names ``image`` gives the NIC groups of ``profile``, as recorded; None: the kernel's."""
    if image is None:
        return None
    recorded = yaml.safe_load(NIC_NAMES.read_text(encoding="utf-8"))[profile][image]
    return {group: recorded[group] for group in GROUPS if group in recorded}


def main(argv: list[str]) -> int:
    (spec,) = argv
    catalog = plugin_utils("fabric_catalog").load_catalog()
    for tree in json.loads(spec):
        root = Path(tree["dir"])
        shutil.rmtree(root, ignore_errors=True)
        write_tree(
            catalog.get(tree["profile"]),
            root,
            faults(tree.get("faults") or {}),
            sriov_totalvfs=tree.get("sriov_totalvfs"),
            nic_names=nic_names(tree["profile"], tree.get("nic_names_image")),
        )
        print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
