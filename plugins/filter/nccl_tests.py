# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: nccl_parse
author: gpufabric developers
version_added: "0.6.0"
short_description: Parse nccl-tests output (text or -J JSON) into runs
description:
  - Returns a list of runs, one per collective test in the output, each with C(collective), C(version), C(nranks),
    C(rows), C(avg_busbw), C(out_of_bounds), C(complete), C(errors), C(source_format), C(hosts) and C(notes).
  - Never fails on bad input; an empty, binary, truncated or failed run comes back with C(complete=false) and the
    reason in C(errors). docs/nccl-tests.md describes the formats handled.
  - The work is bounded (docs/nccl-tests.md, Limits); an input over a limit (8 MiB, 200,000 lines, 64 runs,
    16,384 rows, 64 JSON documents, 1,000,000 JSON values, 32 levels of JSON nesting) is one run with
    C(complete=false) and the limit in C(errors).
  - The companion filter C(nccl_over_limit) takes a size in bytes and returns why the parser would refuse an
    output that large, or an empty string; the role uses it to leave such an output on the host.
  - The companion filter C(nccl_judge) judges one run against a catalog profile's bandwidth thresholds.
options:
  _input:
    description: The output of an nccl-tests binary (stdout, optionally with stderr) or the content of its -J file.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Parse and judge the all_reduce run
  ansible.builtin.set_fact:
    nccl_tests__verdict: >-
      {{ (nccl_tests__output.stdout | gpufabric.cluster.nccl_parse)[0]
         | gpufabric.cluster.nccl_judge(nccl_tests__profile, 2, 'ring') }}
"""

RETURN = r"""
_value:
  description:
    - C(nccl_parse), a list of run dictionaries; C(nccl_judge), a dictionary with C(status) (pass, warn, fail,
      unjudged), C(collective), C(nodes), C(algo), C(threshold), C(measured_busbw), C(largest_size) and C(reasons).
  type: raw
"""

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
