# SPDX-License-Identifier: Apache-2.0
"""Hold every molecule `check` run to the check-mode contract, inside molecule's own run.

A role that lies in check mode breaks drift detection: `gpufabric drift` is check mode. So each
scenario runs check twice and this callback judges both from the play recap:
- on a fresh host (molecule's state says not converged): no failure, and changes announced, or
  none at all where the scenario only reads (MOLECULE_CHECK_FRESH=none in its molecule.yml);
- on a converged host: no failure and zero changes.
A broken contract fails the run: ansible-core lets an AssertionError out of a callback (it does so
for tests), so `molecule check` and `molecule test` exit non-zero with the verdict as the error.
What check mode must leave untouched on disk is asserted by molecule/resources/check_wrote_nothing.yml.

A scenario that sets MOLECULE_CHANGES_DIR (its molecule.yml's ansible env) also gets, for every run, the tasks that
reported a change on each host, in <dir>/<playbook>[-check]-<fresh|converged>.json: its verify compares the check
on the fresh host with the converge that followed (check mode predicts exactly what converge does).
"""

from __future__ import annotations

import json
import os

import yaml
from ansible import context
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: check_contract
    type: aggregate
    short_description: fail a molecule check run that breaks the check-mode contract
    description: judges the recap of ansible-playbook --check against molecule's converged state
    requirements: [enabled in callbacks_enabled, MOLECULE_STATE_FILE set by molecule]
"""


def converged() -> bool:
    """Whether molecule has converged this scenario (its state file, written after converge)."""
    try:
        with open(os.environ["MOLECULE_STATE_FILE"], encoding="utf-8") as stream:
            return bool((yaml.safe_load(stream) or {}).get("converged"))
    except (KeyError, OSError):
        return False


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "check_contract"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._playbook = ""
        self._changed: dict[str, list[str]] = {}

    def v2_playbook_on_start(self, playbook) -> None:
        self._playbook = os.path.splitext(os.path.basename(playbook._file_name))[0]

    def _changed_task(self, result) -> None:
        name = result._task.get_name()
        changed = self._changed.setdefault(result._host.get_name(), [])
        if name not in changed:  # a loop's items, or a task run twice, count once
            changed.append(name)

    def v2_runner_on_ok(self, result) -> None:
        if result._result.get("changed"):
            self._changed_task(result)

    def v2_runner_on_skipped(self, result) -> None:
        # A command check mode cannot run (ansible.builtin.command's "Command would have run if not in check mode")
        # is announced, not hidden: it counts as predicted.
        if "would have run" in str(result._result.get("msg", "")):
            self._changed_task(result)

    def _record_changes(self, check: bool, hosts: list[str]) -> None:
        directory = os.environ.get("MOLECULE_CHANGES_DIR")
        if not directory:
            return
        os.makedirs(directory, exist_ok=True)
        name = f"{self._playbook}{'-check' if check else ''}-{'converged' if converged() else 'fresh'}.json"
        with open(os.path.join(directory, name), "w", encoding="utf-8") as stream:
            json.dump({host: self._changed.get(host, []) for host in hosts}, stream, indent=1, sort_keys=True)

    def v2_playbook_on_stats(self, stats) -> None:
        self._record_changes(bool(context.CLIARGS.get("check")), sorted(stats.processed))
        if not context.CLIARGS.get("check"):
            return
        host_is_converged = converged()
        fresh_changes = os.environ.get("MOLECULE_CHECK_FRESH", "some")
        broken = []
        for host in sorted(stats.processed):
            counts = stats.summarize(host)
            changed = counts["changed"]
            if counts["failures"] or counts["unreachable"]:
                broken.append(f"{host}: check mode failed or lost the host ({counts})")
            elif host_is_converged and changed:
                broken.append(f"{host}: {changed} change(s) announced on a converged host (drift would report them)")
            elif not host_is_converged and fresh_changes == "none" and changed:
                broken.append(f"{host}: {changed} change(s) announced by a scenario that only reads")
            elif not host_is_converged and fresh_changes != "none" and not changed:
                broken.append(f"{host}: check on a fresh host announced no change")
        phase = "converged" if host_is_converged else "fresh"
        if broken:
            verdict = f"check-mode contract broken on the {phase} host(s):\n  " + "\n  ".join(broken)
            self._display.error(verdict)
            raise AssertionError(verdict)
        self._display.display(f"check-mode contract held on the {phase} host(s): {', '.join(sorted(stats.processed))}")
