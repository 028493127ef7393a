# SPDX-License-Identifier: Apache-2.0
# Documented beside this file, in plugins/filter/nccl_env_plan.yml.
from __future__ import annotations

from ansible_collections.gpufabric.cluster.plugins.module_utils import nccl_env
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.role_plan import role_plan_filter


class FilterModule:
    def filters(self):
        return {"nccl_env_plan": role_plan_filter("nccl_env", nccl_env.plan)}
