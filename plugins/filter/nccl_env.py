# SPDX-License-Identifier: Apache-2.0
# Documented beside this file, in plugins/filter/nccl_env_plan.yml.
from __future__ import annotations

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.module_utils_on_use import module_utils
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter


class FilterModule:
    def filters(self):
        return {"nccl_env_plan": role_plan_filter("nccl_env", module_utils("nccl_env"))}
