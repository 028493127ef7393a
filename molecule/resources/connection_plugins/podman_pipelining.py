# SPDX-License-Identifier: Apache-2.0
"""containers.podman.podman with pipelining: the molecule scenarios' connection to their containers.

Without pipelining, every task costs several `podman exec` runs (make a temp dir, chmod, run the module,
remove the dir), each a podman process, conmon and a runc exec. With it, the module goes to the
container's Python on stdin in one `podman exec -i`, as it goes over SSH to a real host with the tuned
settings of `gpufabric apply` (pipelining on). Upstream also runs `podman mount` at every task's
connection; here the root is mounted only when a file is copied in or out (copy, template, fetch), which
then travels through it as upstream does. Upstream turns pipelining off because its exec never passes
stdin (no -i). bench/podman_pipelining.py measures the difference.
"""

from __future__ import annotations

from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

DOCUMENTATION = """
    name: podman_pipelining
    short_description: containers.podman.podman with pipelining, for the molecule scenarios
    description:
        - Runs commands in an existing podman container like containers.podman.podman, and passes a
          pipelined module on stdin (podman exec -i).
    options:
      remote_addr:
        description: The name or ID of the container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User to run commands as inside the container.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments to pass to the podman command line.
        default: ''
        vars:
          - name: ansible_podman_extra_args
      podman_executable:
        description: Executable for podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
      pipelining:
        description: Send the module on stdin instead of copying it into the container first.
        type: boolean
        default: true
        vars:
          - name: ansible_pipelining
"""


class Connection(PodmanConnection):
    transport = "podman_pipelining"
    has_pipelining = True

    def _connect(self):
        # No mount yet: most tasks only exec (see _mounted).
        self._connected = True
        return self

    def _mounted(self) -> None:
        if self._mount_point is None:
            super()._connect()

    def put_file(self, in_path, out_path):
        self._mounted()
        return super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mounted()
        return super().fetch_file(in_path, out_path)

    def _podman(self, cmd, cmd_args=None, in_data=None, use_container_id=True):
        # `podman exec` reads stdin only with -i: add it when there is something to send.
        if in_data is not None and isinstance(cmd, list) and cmd[:1] == ["exec"]:
            cmd = ["exec", "-i", *cmd[1:]]
        return super()._podman(cmd, cmd_args, in_data, use_container_id)
