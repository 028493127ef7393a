# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: nccl_tests_run
author: gpufabric developers
version_added: "0.6.0"
short_description: Plan the nccl-tests build and runs for the nccl_tests role
description:
  - C(install) takes the role's install inputs and returns the tarball URL and paths, the C(make) argument
    vector of the MPI build, the binaries and the build prerequisites, or C(error) naming the first bad value.
  - C(run) takes the run inputs (hosts, catalog environment and thresholds, sizes, timeouts) and returns the
    hostfile and, per collective, the algorithm, sizes, environment, output file and C(mpirun) argument vector.
  - C(profile) takes a catalog profile name and returns the whole catalog profile (its C(bandwidth) thresholds
    included), or an empty dictionary when the catalog does not have it.
  - C(verdict) takes a verdict of M(gpufabric.cluster.nccl_judge) and the exit status of C(mpirun) and returns
    the verdict the role reports (a non-zero exit status fails the run).
  - The logic lives in plugins/module_utils/nccl_tests_run.py and is unit-tested there.
positional: what
options:
  _input:
    description:
      - For C(install) and C(run), a dictionary of inputs (see C(install_plan()) and C(run_plan()) in
        module_utils/nccl_tests_run.py).
      - For C(profile), the profile name.
      - For C(verdict), the judge's verdict.
    type: raw
    required: true
  what:
    description: Which computation.
    type: str
    choices: [install, run, profile, verdict]
    required: true
  catalog_files:
    description: For C(profile), override catalog files merged over the built-in catalog, in order.
    type: list
    elements: str
    default: []
  exit_code:
    description: For C(verdict), the exit status of the C(timeout … mpirun) command.
    type: int
"""

EXAMPLES = r"""
- name: Plan the build
  ansible.builtin.set_fact:
    plan: "{{ {'install': 'source', 'version': '2.17.6', 'sha256': sha, 'collectives': ['all_reduce']}
              | gpufabric.cluster.nccl_tests_run('install') }}"
"""

RETURN = r"""
_value:
  description: The install plan, the run plan, the catalog profile or the reported verdict.
  type: raw
"""

from pathlib import Path

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils.nccl_tests_run import (
    install_plan,
    run_plan,
    verdict_line,
)
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_catalog import (
    CatalogError,
    load_catalog,
    override_files_from_env,
)

WHAT = ("install", "run", "profile", "verdict")


def nccl_tests_run(value, what, catalog_files=None, exit_code=None):
    if what in ("install", "run"):
        if not isinstance(value, dict):
            raise AnsibleFilterError(f"nccl_tests_run('{what}') expects a dictionary of inputs")
        return install_plan(value) if what == "install" else run_plan(value)
    if what == "profile":
        overrides = [*override_files_from_env(), *(Path(str(f)) for f in catalog_files or [])]
        try:
            profile = load_catalog(overrides).get(str(value))
        except CatalogError as exc:
            raise AnsibleFilterError(f"gpufabric catalog: {exc}") from None
        return dict(profile or {})
    if what == "verdict":
        if not isinstance(value, dict):
            raise AnsibleFilterError("nccl_tests_run('verdict') expects the judge's verdict (a dictionary)")
        return verdict_line(value, None if exit_code is None else int(exit_code))
    raise AnsibleFilterError(f"nccl_tests_run: '{what}' is not a computation; accepted: {', '.join(WHAT)}")


class FilterModule:
    def filters(self):
        return {"nccl_tests_run": nccl_tests_run}
