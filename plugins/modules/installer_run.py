#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: installer_run
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Run a vendor installer or build once per pinned release, recorded in a stamp file
description:
  - Runs O(argv) when the stamp file does not record O(stamp) (the pinned release, for example an installer
    image's digest reference) or when one of O(creates) is missing, then checks that the installer left every
    path in O(creates) and only then writes O(stamp) to O(stamp_file).
  - Without O(stamp_file), the paths in O(creates) alone decide (like C(ansible.builtin.command)'s C(creates),
    with check mode reporting the run and the paths checked after it).
  - An installer that fails, or that leaves a path of O(creates) missing, fails the task with its last lines of
    output, and the stamp is not written, so the next run runs it again.
  - Paths in O(replaces) (the previous release's files) are removed just before the installer runs, never when
    it does not run.
  - In check mode nothing runs, nothing is removed or written; the task reports whether the installer would
    run and why. The diff shows the stamp before and after.
options:
  argv:
    description: The installer's command line, run without a shell.
    type: list
    elements: str
    required: true
  chdir:
    description: Directory to run the installer in.
    type: path
  stamp_file:
    description:
      - File that records the release installed. Its directory must exist (outside check mode).
      - Given with O(stamp); without both, O(creates) must name at least one path.
    type: path
  stamp:
    description:
      - What the stamp file must record; compared and written without regard to surrounding whitespace (the
        file ends with one newline).
    type: str
  creates:
    description: Paths the installer leaves. A missing one makes the installer run; after it, each must exist.
    type: list
    elements: path
    default: []
  replaces:
    description: Paths removed (files or directory trees) just before the installer runs.
    type: list
    elements: path
    default: []
attributes:
  check_mode:
    description: Can run in check mode and return the changed status it predicts without changing the target.
    support: full
  diff_mode:
    description: Returns the stamp before and after (or, in check mode, what it would be after).
    support: full
  idempotent:
    description: Run again with the same arguments, it changes nothing and reports C(changed=false).
    support: full
"""

EXAMPLES = r"""
- name: Run the NCCL plugin installer image once per pinned image
  gpufabric.cluster.installer_run:
    argv: [/usr/bin/podman, run, --rm, --volume=/var/lib:/var/lib,
           "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev@sha256:9a8b...",
           install, --install-nccl]
    stamp_file: /var/lib/gpufabric/gcp_tcpx/plugin-image
    stamp: us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev@sha256:9a8b...
    creates: [/var/lib/tcpx/lib64/libnccl-net.so, /var/lib/tcpx/lib64/libnccl.so.2]
"""

RETURN = r"""
reason:
  description: Why the installer ran (or, in check mode, would run); empty when it did not.
  returned: always
  type: str
  sample: "stamp records 'registry/x@sha256:1...', not 'registry/x@sha256:2...'"
rc:
  description: The installer's exit code.
  returned: when the installer ran
  type: int
stdout:
  description: The installer's standard output.
  returned: when the installer ran
  type: str
stderr:
  description: The installer's standard error.
  returned: when the installer ran
  type: str
"""

import os
import shutil
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def read_stamp(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read().strip()
    except FileNotFoundError:
        return None


def why_run(recorded: str | None, stamp: str | None, creates: list[str]) -> str:
    """Why the installer has to run, or '' when the stamp (if any) and its files say it already has."""
    if stamp is not None and recorded is None:
        return "no stamp yet"
    if stamp is not None and recorded != stamp:
        return f"stamp records {recorded!r}, not {stamp!r}"
    missing = [path for path in creates if not os.path.lexists(path)]
    return f"{', '.join(missing)} missing" if missing else ""


def remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def last_lines(*outputs: str) -> str:
    lines = [line for output in outputs for line in output.splitlines()]
    return " | ".join(lines[-15:])


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "argv": {"type": "list", "elements": "str", "required": True},
            "chdir": {"type": "path"},
            "stamp_file": {"type": "path"},
            "stamp": {"type": "str"},
            "creates": {"type": "list", "elements": "path", "default": []},
            "replaces": {"type": "list", "elements": "path", "default": []},
        },
        required_together=[("stamp_file", "stamp")],
        supports_check_mode=True,
    )
    params = module.params
    stamped = params["stamp_file"] is not None
    if not stamped and not params["creates"]:
        module.fail_json(msg="give stamp_file and stamp, or creates: without either nothing tells whether it ran")
    stamp = params["stamp"].strip() if stamped else None
    recorded = read_stamp(params["stamp_file"]) if stamped else None
    reason = why_run(recorded, stamp, params["creates"])
    # No rc until the installer runs: Ansible fails a result whose rc is not 0.
    result: dict[str, Any] = {"changed": bool(reason), "reason": reason}
    if stamped:
        before = f"{recorded}\n" if recorded is not None else ""
        result["diff"] = {"before": before, "after": f"{stamp}\n" if reason else before}
    else:
        before = "".join(f"{path}: {'present' if os.path.lexists(path) else 'absent'}\n" for path in params["creates"])
        result["diff"] = {"before": before, "after": "".join(f"{path}: present\n" for path in params["creates"])}
    if not reason or module.check_mode:
        module.exit_json(**result)

    command = " ".join(params["argv"]) + (f" (in {params['chdir']})" if params["chdir"] else "")
    again = "; the stamp is not written, so the next run runs it again" if stamped else ""
    for path in params["replaces"]:
        remove(path)
    rc, out, err = module.run_command(params["argv"], cwd=params["chdir"])
    result |= {"rc": rc, "stdout": out, "stderr": err}
    if rc != 0:
        module.fail_json(
            msg=f"`{command}` exited with rc {rc}{again}. Last lines: {last_lines(out, err)}",
            **result,
        )
    missing = [path for path in params["creates"] if not os.path.lexists(path)]
    if missing:
        module.fail_json(
            msg=f"{', '.join(missing)} missing after `{command}`{again}.",
            **result,
        )
    if not stamped:
        module.exit_json(**result)
    directory = os.path.dirname(params["stamp_file"]) or "."
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, encoding="utf-8") as stream:
        stream.write(f"{stamp}\n")
    module.atomic_move(stream.name, params["stamp_file"])
    os.chmod(params["stamp_file"], 0o644)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
