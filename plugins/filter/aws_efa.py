# SPDX-License-Identifier: Apache-2.0
# Several filters, so each documents itself beside this file, in plugins/filter/<filter name>.yml
# (ansible-doc reads a filter's own YAML file only when the Python file holds no DOCUMENTATION).
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import require_dict, role_plan_filter

aws_efa = module_utils("aws_efa")


def aws_efa_install(plan, marker="", state="", packages=None):
    require_dict(plan, "aws_efa_install", "the role's plan aws_efa__plan")
    if plan.get("errors") or "flags" not in plan:
        raise AnsibleFilterError("aws_efa_install expects a plan without errors (aws_efa__plan.errors is not empty)")
    if packages is not None and not isinstance(packages, dict):
        raise AnsibleFilterError(
            f"aws_efa_install expects packages as package_facts' mapping, got {type(packages).__name__}"
        )
    try:
        return aws_efa.install_decision(plan, str(marker or ""), str(state or ""), str(plan["mode"]), packages)
    except ValueError as exc:
        raise AnsibleFilterError(f"aws_efa_install: {exc}") from exc


def aws_efa_libraries(plan, found):
    require_dict(plan, "aws_efa_libraries", "the role's plan aws_efa__plan")
    if not isinstance(found, list):
        raise AnsibleFilterError(f"aws_efa_libraries expects found as a list of paths, got {type(found).__name__}")
    return aws_efa.library_findings(str(plan.get("ld_library_path") or ""), found, list(plan.get("components") or []))


def aws_efa_fi_info(output, plan):
    require_dict(plan, "aws_efa_fi_info", "the host's plan gpufabric_plan")
    expected = ((plan.get("nics") or {}).get("gpu") or {}).get("count")
    if not isinstance(expected, int):
        raise AnsibleFilterError(
            f"aws_efa_fi_info: the plan of profile {plan.get('profile')!r} has no GPU NIC count (nics.gpu.count)"
        )
    return aws_efa.fi_info_report(str(output or ""), expected, str(plan.get("profile") or ""))


class FilterModule:
    def filters(self):
        return {
            "aws_efa_plan": role_plan_filter("aws_efa", aws_efa),
            "aws_efa_install": aws_efa_install,
            "aws_efa_libraries": aws_efa_libraries,
            "aws_efa_fi_info": aws_efa_fi_info,
        }
