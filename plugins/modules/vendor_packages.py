#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: vendor_packages
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Install vendor packages at exact versions from signed repositories, and hold them
description:
  - The one way the collection's roles install packages pinned to exact versions, from a vendor's repository
    (DOCA, CUDA, Google's) or the distribution's own. Its signing key is installed first by
    M(gpufabric.cluster.repo_key), pinned by fingerprint; this module writes the repository's source, signed by
    that keyring only, and installs the packages.
  - "In order: writes a deb822 source per repository (C(/etc/apt/sources.list.d/NAME.sources), C(Signed-By)
    the keyring, never C(trusted)) and, with O(preferences), an APT preferences file pinning every versioned
    package (C(Pin-Priority) O(pin_priority)); refreshes the package index when something must be installed or
    a source changed; fails when apt refuses a repository's signature (one message naming the repository and
    its keyring) or when a pinned version is not offered (naming the versions that are); releases the holds on
    what moves; installs the exact versions (downgrades allowed, recommends not installed, and the dependencies
    the pinned packages require at an exact C(= version) named too); holds the packages again."
  - An upgrade or downgrade happens only when a pin moves. On a host already at the pins nothing is read from
    the network and nothing changes.
  - Check mode compares the files and reads the installed versions and holds, and reports what would change.
    When the sources are already in place it refreshes the index (a cache) and checks the pinned versions are
    offered, as a real run would; on a fresh host, where a source is not written yet, it reports the packages
    it would install with RV(verified=false).
  - apt only so far (Debian, Ubuntu). The dnf backend has its place beside the apt one
    (plugins/module_utils/vendor_packages_dnf.py, see docs/architecture.md); on other hosts the module fails.
options:
  repositories:
    description: The repositories to configure, each in its own deb822 source file.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The source file's name, without C(.sources) (e.g. C(gpufabric-doca)).
        type: str
        required: true
      uris:
        description: The repository URIs (C(https://...), or C(file:/...) for a local mirror).
        type: list
        elements: str
        required: true
      suites:
        description: The suites; C(./) or C(/) for a flat repository.
        type: list
        elements: str
        required: true
      components:
        description: The components; empty for a flat repository.
        type: list
        elements: str
        default: []
      architectures:
        description: Restrict the source to these architectures; empty for all of the host's.
        type: list
        elements: str
        default: []
      signed_by:
        description:
          - The keyring the repository must be signed by, an absolute path ending in C(.asc) (armored) or
            C(.gpg) (binary), as installed by M(gpufabric.cluster.repo_key).
        type: path
        required: true
      managed_by:
        description:
          - Who manages the source file, in its header; empty takes O(managed_by).
          - A repository several roles configure (NVIDIA's CUDA repository - nvidia_driver and nccl) names them all,
            so that each role writes the same file.
        type: str
        default: ""
  packages:
    description:
      - The packages, from the repositories above or the distribution's. Each is installed at its exact
        O(packages[].version); without a version it is installed when missing and never moved.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The package name.
        type: str
        required: true
      version:
        description:
          - The exact version (as C(apt-cache madison) lists it); empty for any.
          - A version with C(*) is a glob, matched against the whole version as APT matches the version of a pin in
            its preferences; C(570.133.20-*) is any revision of upstream 570.133.20. It installs the newest
            version the repositories offer that it matches, or keeps an installed version it matches
            (RV(resolved)); O(preferences) pins that resolved version.
        type: str
      hold:
        description: Hold the package (C(apt-mark hold)) so that upgrades cannot move it.
        type: bool
        default: true
      repository:
        description:
          - The O(repositories[].name) the package's version comes from; empty for the distribution's own
            archive. Named when the version is not offered; C(gpufabric plan --json) shows it.
        type: str
        default: ""
  preferences:
    description:
      - Name of an APT preferences file (C(/etc/apt/preferences.d/NAME.pref)) pinning every versioned package
        at O(pin_priority); empty writes none.
    type: str
    default: ""
  pin_priority:
    description: C(Pin-Priority) of the preferences file's pins (above 1000 allows downgrades to the pin).
    type: int
    default: 1001
  release:
    description:
      - Names of APT preferences files (C(/etc/apt/preferences.d/NAME.pref)) that the role's other provision mode
        wrote, such as adopt mode's record of an image's stack when the host goes back to install mode. Before
        anything is installed, each file present is removed and the holds on the packages it pins are released,
        except on the packages this call holds. dpkg does not remove a held package, so replacing an adopted stack
        needs its holds released first.
      - Independently of this option, packages that O(preferences) pinned before and that O(packages) no longer
        lists have their holds released, so that nothing stays held that no pin explains.
    type: list
    elements: str
    default: []
  managed_by:
    description: Who manages the files (say the role), written in their header.
    type: str
    default: gpufabric.cluster.vendor_packages
  pins_from:
    description: Where the versions come from (say the role variables), named in error messages.
    type: str
    default: the packages option
  offer_hint:
    description: Appended to the refusal of a version the repositories do not offer (say which components hold it).
    type: str
    default: ""
attributes:
  check_mode:
    description: Compares files, reads versions and holds, and reports what would change; writes nothing.
    support: full
  diff_mode:
    description: Shows each file before and after, and the packages' versions and holds before and after.
    support: full
notes:
  - The keyring must already be in place (M(gpufabric.cluster.repo_key)); in check mode on a fresh host it is
    not, which is why the versions are then reported unverified.
seealso:
  - module: gpufabric.cluster.repo_key
"""

EXAMPLES = r"""
- name: Install the DOCA repository key, pinned by its fingerprint
  gpufabric.cluster.repo_key:
    url: https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub
    dest: /etc/apt/keyrings/gpufabric-doca.asc
    fingerprints: "{{ rdma_stack_doca_key_fingerprints }}"

- name: Install DOCA-OFED at its exact version and hold it
  gpufabric.cluster.vendor_packages:
    repositories:
      - name: gpufabric-doca
        uris: [https://linux.mellanox.com/public/repo/doca/2.9.1/debian12/x86_64/]
        suites: [./]
        signed_by: /etc/apt/keyrings/gpufabric-doca.asc
    packages:
      - {name: doca-ofed, version: 2.9.1-1}
      - {name: doca-ofed-userspace}
    managed_by: role gpufabric.cluster.rdma_stack
    pins_from: rdma_stack_doca_version

- name: Pin the NVIDIA driver in APT preferences too
  gpufabric.cluster.vendor_packages:
    repositories:
      - name: gpufabric-cuda
        uris: [https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/]
        suites: [/]
        signed_by: /etc/apt/keyrings/gpufabric-cuda.asc
    packages:
      - {name: nvidia-open, version: 570.133.20-1}
      - {name: nvidia-kernel-open-dkms, version: 570.133.20-1}
    preferences: gpufabric-nvidia-driver
"""

RETURN = r"""
files:
  description: The source and preferences files written (in check mode, that would be written).
  returned: always
  type: list
  elements: str
  sample: [/etc/apt/sources.list.d/gpufabric-doca.sources]
installed:
  description:
    - What was (would be) installed, as C(name=version) (C(name) for an unversioned package); empty when every
      package is at its pin. Includes the dependencies named for their exact C(= version).
  returned: always
  type: list
  elements: str
  sample: [doca-ofed=2.9.1-1, doca-ofed-userspace=2.9.1-1]
unheld:
  description: Held packages released to move to their new pin (held again afterwards).
  returned: always
  type: list
  elements: str
released:
  description:
    - Held packages this call no longer manages, whose holds were released (pinned in an O(release) file, or
      dropped from O(packages) since O(preferences) pinned them).
  returned: always
  type: list
  elements: str
removed:
  description: The O(release) files removed.
  returned: always
  type: list
  elements: str
held:
  description: Packages put on hold.
  returned: always
  type: list
  elements: str
refreshed:
  description: Whether the package index was refreshed (C(apt-get update)).
  returned: always
  type: bool
verified:
  description:
    - Whether the pinned versions to install were checked against the repositories. False only in check mode
      when a source is not in place yet.
  returned: always
  type: bool
resolved:
  description:
    - Each package pinned by a glob and the exact version it resolved to (the installed one it matches, or the
      newest offered one it matches); a package is absent while check mode could not consult the repositories.
  returned: always
  type: dict
  sample: {nvidia-open: 580.126.09-1ubuntu1, nvidia-fabricmanager: 580.126.09-1ubuntu1}
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.cluster.plugins.module_utils.vendor_packages import (
    Outcome,
    VendorPackagesError,
    converge,
    parse_request,
)
from ansible_collections.gpufabric.cluster.plugins.module_utils.vendor_packages_apt import Apt

ARGUMENT_SPEC = {
    "repositories": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "name": {"type": "str", "required": True},
            "uris": {"type": "list", "elements": "str", "required": True},
            "suites": {"type": "list", "elements": "str", "required": True},
            "components": {"type": "list", "elements": "str", "default": []},
            "architectures": {"type": "list", "elements": "str", "default": []},
            "signed_by": {"type": "path", "required": True},
            "managed_by": {"type": "str", "default": ""},
        },
    },
    "packages": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "name": {"type": "str", "required": True},
            "version": {"type": "str"},
            "hold": {"type": "bool", "default": True},
            "repository": {"type": "str", "default": ""},
        },
    },
    "preferences": {"type": "str", "default": ""},
    "pin_priority": {"type": "int", "default": 1001},
    "managed_by": {"type": "str", "default": "gpufabric.cluster.vendor_packages"},
    "pins_from": {"type": "str", "default": "the packages option"},
    "offer_hint": {"type": "str", "default": ""},
    "release": {"type": "list", "elements": "str", "default": []},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # The dnf backend goes here (vendor_packages_dnf.Dnf), chosen by the host's package manager.
    if not module.get_bin_path("apt-get"):
        module.fail_json(msg="no apt-get on this host; accepted: Debian or Ubuntu (dnf is not supported yet)")
    try:
        request = parse_request(module.params)
        outcome = converge(request, Apt(module), module.check_mode)
    except VendorPackagesError as problem:
        # A source written before the refusal (apt then refused its signature) is reported as changed.
        module.fail_json(msg=str(problem), **_result(problem.outcome))
    module.exit_json(**_result(outcome))


def _result(outcome: Outcome) -> dict[str, Any]:
    return {
        "changed": outcome.changed,
        "files": outcome.files,
        "installed": outcome.install,
        "unheld": outcome.unhold,
        "released": outcome.released,
        "removed": outcome.removed,
        "held": outcome.hold,
        "refreshed": outcome.refreshed,
        "verified": outcome.verified,
        "resolved": outcome.resolved,
        "diff": outcome.diff,
    }


if __name__ == "__main__":
    main()
