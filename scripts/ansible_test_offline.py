# SPDX-License-Identifier: Apache-2.0
"""Run ansible-test with each sanity test's Python requirements taken from this environment, not PyPI.

ansible-test gives a sanity test a virtual environment of its own and pip-installs
the versions it pins there (ansible_test/_data/requirements/sanity.*.txt), which
needs PyPI. This wrapper lets ansible-test create those environments as usual, but
instead of running pip it links each distribution the test asks for (and what that
requires in turn) from the environment running this script into the test's one.
The test environments stay as small as ansible-test means them to be (the import
test still sees only Jinja2 and PyYAML, so an unguarded import of anything else is
still caught), and the versions are the ones constraints.txt pins.

    .venv/bin/python scripts/ansible_test_offline.py sanity --local --python 3.11 [...]

scripts/sanity lays out the collection tree and calls this.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible_test._internal.commands import sanity as ansible_test_sanity
from ansible_test._internal.python_requirements import PipCommand, PipInstall
from ansible_test._util.target.cli.ansible_test_cli_stub import main
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def required_names(commands: list[PipCommand]) -> set[str]:
    """Names of the distributions the pip commands would install (pip itself aside)."""
    names: set[str] = set()
    for command in commands:
        # PipBootstrap installs pip and PipUninstall removes it again: nothing a test imports.
        if not isinstance(command, PipInstall):
            continue
        lines = [line for _path, contents in command.requirements for line in contents.splitlines()]
        for line in [*lines, *command.packages]:
            spec = line.split("#", 1)[0].strip()
            if spec:
                names.add(canonicalize_name(Requirement(spec).name))
    return names


def with_dependencies(names: set[str]) -> list[importlib.metadata.Distribution]:
    """The distributions installed here for names and, recursively, what they require."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = sorted(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(
                f"ansible-test sanity needs the Python package {name!r}, which {sys.prefix} lacks:"
                " pin it in constraints.txt, list it in the dev extra of pyproject.toml and install it"
            ) from None
        found[name] = dist
        for spec in dist.requires or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return list(found.values())


def site_packages(python: str) -> Path:
    """The site-packages directory of the environment whose interpreter is python."""
    out = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return Path(out.strip())


def link_distributions(python: str, dists: list[importlib.metadata.Distribution]) -> None:
    """Symlink the top-level files and packages of dists into the environment of python."""
    target_dir = site_packages(python)
    for dist in dists:
        name = dist.metadata["Name"]
        if dist.files is None:
            raise SystemExit(f"cannot tell which files the installed {name} consists of (no RECORD)")
        tops = {file.parts[0] for file in dist.files}
        # '..' holds console scripts in bin/; .pth files would run code at start-up.
        for top in sorted(tops - {"..", "__pycache__"}):
            if top.endswith(".pth"):
                continue
            link = target_dir / top
            if not link.exists() and not link.is_symlink():
                link.symlink_to(Path(str(dist.locate_file(top))))


def run_pip_offline(args: Any, python: Any, commands: list[PipCommand], connection: Any = None) -> None:
    """Stands in for ansible-test's run_pip when it fills a sanity test's virtual environment."""
    if connection is not None:
        raise NotImplementedError("only local sanity virtual environments can be filled offline")
    dists = with_dependencies(required_names(commands))
    if not args.explain:
        link_distributions(python.path, dists)


ansible_test_sanity.run_pip = run_pip_offline

if __name__ == "__main__":
    sys.argv[0] = "ansible-test"
    main()
