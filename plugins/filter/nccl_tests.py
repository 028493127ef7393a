# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import require_dict, role_plan_filter

nccl_tests_run = module_utils("nccl_tests_run")
judging = module_utils("nccl_judge")
nccl_output = module_utils("nccl_output")


def nccl_tests_run_plan(settings, install, hosts, addresses, plan, facts=None):
    require_dict(settings, "nccl_tests_run_plan", "the role's run settings")
    require_dict(install, "nccl_tests_run_plan", "the install plan of nccl_tests_plan")
    for name, value in (("hosts", hosts), ("addresses", addresses)):
        if not isinstance(value, list):
            raise AnsibleFilterError(f"nccl_tests_run_plan expects {name} as a list, got {type(value).__name__}")
    host_plan = require_dict(plan, "nccl_tests_run_plan", "the host's plan gpufabric_plan as plan=")
    host_facts = {} if facts is None else require_dict(facts, "nccl_tests_run_plan", "ansible_facts as facts=")
    return nccl_tests_run.run(settings, install, hosts, addresses, host_plan, host_facts)


def nccl_tests_verdict(verdict, exit_code=None):
    require_dict(verdict, "nccl_tests_verdict", "a verdict of nccl_judge")
    try:
        exit_code = None if exit_code is None else int(exit_code)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"nccl_tests_verdict: exit_code must be an integer, got {exit_code!r}") from None
    return nccl_tests_run.verdict_line(verdict, exit_code)


def nccl_parse(text):
    return nccl_output.parse_runs(text)


def nccl_over_limit(size):
    try:
        size = int(size)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"nccl_over_limit expects a size in bytes, got {size!r}") from None
    return nccl_output.over_limit(size) or ""


def nccl_judge(run, plan, nodes, algo="default", collective=None):
    if not isinstance(run, dict):
        raise AnsibleFilterError("nccl_judge expects one run (an item of nccl_parse's list)")
    if not isinstance(plan, dict):
        raise AnsibleFilterError(
            "nccl_judge expects the host's plan gpufabric_plan (a dictionary with bandwidth and gpus) as its first "
            f"argument, got {type(plan).__name__}"
        )
    try:
        nodes = None if nodes is None else int(nodes)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"nccl_judge: nodes must be an integer, got {nodes!r}") from None
    return judging.judge(run, plan, nodes, str(algo), collective=collective)


class FilterModule:
    def filters(self):
        return {
            "nccl_tests_plan": role_plan_filter("nccl_tests", nccl_tests_run, reads_catalog=False),
            "nccl_tests_run_plan": nccl_tests_run_plan,
            "nccl_tests_verdict": nccl_tests_verdict,
            "nccl_parse": nccl_parse,
            "nccl_judge": nccl_judge,
            "nccl_over_limit": nccl_over_limit,
        }
