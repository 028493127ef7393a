#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: container_image
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Pull container images by digest into podman's or docker's local store when it lacks them
description:
  - For each reference in O(references), asks the runtime whether its local store holds it
    (C(RUNTIME OPTIONS image inspect REFERENCE)) and pulls the ones it lacks (C(RUNTIME OPTIONS pull --quiet
    REFERENCE)). An image already there is never pulled again, so a baked image keeps what it was built with
    and a host whose registry is unreachable still converges.
  - Meant for references pinned by digest (C(registry/name@sha256:...)), where being in the store means having
    the right content. A tag already in the store is not refreshed.
  - In check mode nothing is pulled; the images that would be are reported. A runtime that is not installed
    yet (check mode on a fresh host, before the task that installs it) counts as an empty store there; outside
    check mode it fails the task.
  - Exists because C(containers.podman.podman_image) lists images with C(podman image ls REFERENCE), which
    finds nothing for a digest reference on podman 4.3 (Debian 12), so it would pull again at every run; and
    because it takes no options before the subcommand (O(runtime_options)) and drives podman only.
options:
  references:
    description:
      - Image references to have in the local store, each pinned by digest, for example
        C(us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev@sha256:...).
    type: list
    elements: str
    required: true
  runtime:
    description:
      - The container runtime's binary, a name looked up on PATH or a full path; C(podman) and C(docker) take the
        same commands here.
    type: str
    default: podman
  runtime_options:
    description:
      - Options placed before the subcommand in every command, for example C([--runtime, crun]) or
        C([--root, /var/lib/other-store]).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Can run in check mode and return the changed status it predicts without changing the target.
    support: full
  diff_mode:
    description: Returns which references are in the store before and after (or, in check mode, would be).
    support: full
  idempotent:
    description: Run again with the same arguments, it changes nothing and reports C(changed=false).
    support: full
"""

EXAMPLES = r"""
- name: Pull the RxDM and the plugin installer by digest unless the store already holds them
  gpufabric.cluster.container_image:
    references:
      - us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev@sha256:1f2e...
      - us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev@sha256:9a8b...

- name: The same with docker
  gpufabric.cluster.container_image:
    references: [us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev@sha256:1f2e...]
    runtime: /usr/bin/docker
"""

RETURN = r"""
present:
  description: The references the store held before the task, in the order of O(references).
  returned: always
  type: list
  elements: str
pulled:
  description: The references pulled (or, in check mode, that would be), in the order of O(references).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule


def store_text(references: list[str], present: set[str]) -> str:
    """The diff's view of the store: one line per reference."""
    return "".join(f"{reference}: {'present' if reference in present else 'absent'}\n" for reference in references)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "references": {"type": "list", "elements": "str", "required": True},
            "runtime": {"type": "str", "default": "podman"},
            "runtime_options": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    references = list(dict.fromkeys(module.params["references"]))
    runtime = module.params["runtime"]
    binary = module.get_bin_path(runtime)
    if binary is None and not module.check_mode:
        module.fail_json(
            msg=f"option runtime {runtime!r} is not installed (not found on PATH); install it before pulling "
            f"{', '.join(references)}."
        )
    command = [binary, *module.params["runtime_options"]]
    present = set()
    if binary is not None:
        for reference in references:
            rc, _out, _err = module.run_command([*command, "image", "inspect", "--format", "{{.Id}}", reference])
            if rc == 0:
                present.add(reference)
    missing = [reference for reference in references if reference not in present]
    if not module.check_mode:
        for reference in missing:
            rc, out, err = module.run_command([*command, "pull", "--quiet", reference])
            if rc != 0:
                module.fail_json(
                    msg=f"{runtime} could not pull {reference} (exit {rc}): {(err or out).strip()}",
                    present=[reference for reference in references if reference in present],
                    pulled=missing[: missing.index(reference)],
                )
    module.exit_json(
        changed=bool(missing),
        present=[reference for reference in references if reference in present],
        pulled=missing,
        diff={"before": store_text(references, present), "after": store_text(references, set(references))},
    )


if __name__ == "__main__":
    main()
