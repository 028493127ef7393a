# SPDX-License-Identifier: Apache-2.0
# Documented beside this file, in plugins/filter/nccl_env_plan.yml.
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufabric.cluster.plugins.module_utils import nccl_env
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import require_dict


def nccl_env_plan(plan, extra=None, path_variables=None):
    host_plan = require_dict(plan, "nccl_env_plan", "the host's plan gpufabric_plan")
    site = {} if extra is None else require_dict(extra, "nccl_env_plan", "nccl_env_extra as extra=")
    if path_variables is not None and not isinstance(path_variables, list):
        raise AnsibleFilterError(
            f"nccl_env_plan expects nccl_env_path_variables as a list, got {type(path_variables).__name__}"
        )
    return nccl_env.plan(
        host_plan.get("env") or {}, site, str(host_plan.get("fabric") or ""), list(path_variables or [])
    )


class FilterModule:
    def filters(self):
        return {"nccl_env_plan": nccl_env_plan}
