# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils.nccl_judge import judge
from ansible_collections.gpufabric.cluster.plugins.module_utils.nccl_output import over_limit, parse_runs


def nccl_parse(text):
    return parse_runs(text)


def nccl_over_limit(size):
    try:
        size = int(size)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"nccl_over_limit expects a size in bytes, got {size!r}") from None
    return over_limit(size) or ""


def nccl_judge(run, profile, nodes, algo="default", collective=None):
    if not isinstance(run, dict):
        raise AnsibleFilterError("nccl_judge expects one run (an item of nccl_parse's list)")
    if not isinstance(profile, dict):
        raise AnsibleFilterError("nccl_judge expects the catalog profile (a dictionary) as its first argument")
    try:
        nodes = None if nodes is None else int(nodes)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"nccl_judge: nodes must be an integer, got {nodes!r}") from None
    return judge(run, profile, nodes, str(algo), collective=collective)


class FilterModule:
    def filters(self):
        return {"nccl_parse": nccl_parse, "nccl_judge": nccl_judge, "nccl_over_limit": nccl_over_limit}
