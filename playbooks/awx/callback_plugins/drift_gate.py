# SPDX-License-Identifier: Apache-2.0
"""Records, per host, the tasks that reported a change, for the last play of playbooks/awx/drift.yml.

A callback cannot change ansible-playbook's exit code, so it only keeps the record; the playbook's
last play reads it and fails each host that would change, which fails the AWX job. It sits next to
the playbook (Ansible loads a playbook's adjacent callback_plugins/ by itself, and this one needs no
enabling), so an AWX job template needs nothing but the playbook's name.

The record is a JSON file in the system's temporary directory ({host: [task, ...]}), rewritten at
each change and removed when the run ends; its path reaches the play through the environment
variable GPUFABRIC_DRIFT_RECORD, which the task workers inherit from ansible-playbook.
"""

from __future__ import annotations

import json
import os
import tempfile

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: drift_gate
type: aggregate
short_description: Records the tasks that would change each host, for the drift gate play
description:
  - Loaded by itself with C(playbooks/awx/drift.yml), which sits next to it.
  - Keeps, for each host, the tasks that reported a change (in check mode, the drift), in a JSON file
    named by the environment variable C(GPUFABRIC_DRIFT_RECORD) that it sets for the run.
author: gpufabric developers (!UNKNOWN)
"""

RECORD_ENV = "GPUFABRIC_DRIFT_RECORD"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "drift_gate"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.changes = {}
        self.path = None

    def v2_playbook_on_start(self, playbook):
        handle, self.path = tempfile.mkstemp(prefix="gpufabric-drift-", suffix=".json")
        os.close(handle)
        self._write()
        os.environ[RECORD_ENV] = self.path

    def v2_runner_on_ok(self, result):
        if result._result.get("changed") is True:
            task = result._task.get_name()
            self.changes.setdefault(result._host.get_name(), []).append(task)
            self._write()

    def v2_playbook_on_stats(self, stats):
        if self.path:
            os.unlink(self.path)
            os.environ.pop(RECORD_ENV, None)
            self.path = None

    def _write(self):
        # Whole or not at all: the play reads it while the run goes on.
        temporary = self.path + ".new"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(self.changes, handle)
        os.replace(temporary, self.path)
