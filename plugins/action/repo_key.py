# SPDX-License-Identifier: Apache-2.0
"""Action for gpufabric.cluster.repo_key: reads O(src) on the controller, so a binary key survives the trip."""

from __future__ import annotations

import base64

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        src = args.get("src")
        if src:
            if any(args.get(name) for name in ("url", "content", "content_base64")):
                raise AnsibleActionFail("src is mutually exclusive with url, content and content_base64")
            try:
                path = self._find_needle("files", src)
            except AnsibleError as error:
                raise AnsibleActionFail(f"the key file src {src!r} was not found on the controller: {error}") from None
            with open(path, "rb") as handle:
                args["content_base64"] = base64.b64encode(handle.read()).decode("ascii")
        result.update(
            self._execute_module(module_name="gpufabric.cluster.repo_key", module_args=args, task_vars=task_vars)
        )
        return result
