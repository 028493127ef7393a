# SPDX-License-Identifier: Apache-2.0
"""The one shape of the roles' plan filters (docs/architecture.md, "The roles' plan helpers"), and the input check
of their other filters.

Every role that plans calls one filter, ``<role>__settings | gpufabric.cluster.<role>_plan(plan=gpufabric_plan,
facts=ansible_facts)``, which checks its three inputs here and hands them to the role's ``plan(settings, host_plan,
facts)`` in module_utils. Roles that read nothing from the catalog (the host stack) may leave out ``plan=``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from ansible.errors import AnsibleFilterError


def role_plan_filter(role: str, planner: ModuleType, reads_catalog: bool = True) -> Callable[..., Any]:
    """The filter ``<role>_plan`` over ``planner.plan`` (a module_utils, read only when the filter runs: see
    module_utils_on_use); ``reads_catalog`` makes ``plan=`` required."""
    name = f"{role}_plan"

    def check(what: str, value: Any, accepted: str) -> None:
        if not isinstance(value, dict):
            raise AnsibleFilterError(
                f"{name}: {what} is {type(value).__name__} {value!r:.80}; accepted: {accepted} (a dictionary)"
            )

    def role_plan(settings: Any, plan: Any = None, facts: Any = None) -> Any:
        check("its input", settings, f"{role}__settings, the role's variables without the {role}_ prefix")
        if reads_catalog or plan is not None:
            check("plan=", plan, "gpufabric_plan, the host's plan")
        check("facts=", facts, "ansible_facts")
        return planner.plan(settings, plan, facts)

    role_plan.__name__ = role_plan.__qualname__ = name
    role_plan.__doc__ = f"``{role}__settings | {name}(plan=gpufabric_plan, facts=ansible_facts)``"
    return role_plan


def require_dict(value: Any, filter_name: str, what: str) -> dict[str, Any]:
    """``value`` when it is a dictionary; else one filter error naming the filter, what it expects and what it got."""
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{filter_name} expects {what} (a dictionary), got {type(value).__name__}")
    return value
