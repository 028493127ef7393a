#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: kernel_packages
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: Check the running kernel's own packages can be had, before a role changes anything
description:
  - "A role's precondition: of the packages the role will install, those that exist for the running kernel's release
    only (C(linux-headers-<uname -r>), C(linux-modules-extra-<uname -r>)) must be installed already or offered by the
    host's configured repositories. The archive keeps the packages of the newest kernel of each flavour only
    (actions/runner-images #2291, #7570, #8080): on a host whose kernel is older, no role can install them."
  - Reads only. When such a package is not installed it refreshes the package index from the sources the host has
    (C(apt-get update), a cache) and asks it (C(apt-cache madison)) for the package and for the flavour's headers
    meta-package (the partner of the installed C(linux-image-<flavour...>) meta-package, else
    C(linux-headers-<flavour>)).
  - Fails with one message naming each package, the running kernel, the version of the flavour's meta-package the
    repositories offer, and the fix (install the flavour's current kernel with its headers and reboot into it, or
    start from an image whose kernel is the archive's current one).
  - Check mode does the same (a precondition, not a change).
  - apt only (Debian, Ubuntu); on other hosts the module fails when one of O(packages) is the running kernel's.
options:
  packages:
    description:
      - The names of the packages the role will install; those ending in C(-<uname -r>) and starting with
        C(linux-) are checked, the others ignored.
    type: list
    elements: str
    required: true
  needed_by:
    description: Who needs the packages (say the role and its setting), named in the message.
    type: str
    default: the role
attributes:
  check_mode:
    description: Reads only; refreshes the package index (a cache) as a real run does.
    support: full
  diff_mode:
    description: Nothing to show.
    support: none
seealso:
  - module: gpufabric.cluster.vendor_packages
"""

EXAMPLES = r"""
- name: Check the running kernel's headers can be had, before any change
  gpufabric.cluster.kernel_packages:
    packages: "{{ nvidia_driver__plan.supply | map(attribute='packages') | flatten | map(attribute='name') | list }}"
    needed_by: role gpufabric.cluster.nvidia_driver for the driver's DKMS build
"""

RETURN = r"""
kernel:
  description: The running kernel's release (C(uname -r)).
  returned: always
  type: str
  sample: 6.8.0-1015-azure
checked:
  description: The packages of O(packages) that are the running kernel's.
  returned: always
  type: list
  elements: str
  sample: [linux-headers-6.8.0-1015-azure]
missing:
  description: Those of RV(checked) not installed.
  returned: always
  type: list
  elements: str
offered:
  description:
    - The newest version the repositories offer of each missing package and of the flavour's headers
      meta-packages; read only when something is missing.
  returned: always
  type: dict
  sample: {linux-headers-azure: 6.8.0-1044.50}
refreshed:
  description: Whether the package index was refreshed (only when something is missing).
  returned: always
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufabric.cluster.plugins.module_utils.kernel_build import (
    check_running_kernel,
    running_kernel_packages,
)
from ansible_collections.gpufabric.cluster.plugins.module_utils.vendor_packages import VendorPackagesError
from ansible_collections.gpufabric.cluster.plugins.module_utils.vendor_packages_apt import Apt

ARGUMENT_SPEC = {
    "packages": {"type": "list", "elements": "str", "required": True},
    "needed_by": {"type": "str", "default": "the role"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    kernel = os.uname().release
    names = [str(name) for name in module.params["packages"]]
    result = {"changed": False, "kernel": kernel, "checked": [], "missing": [], "offered": {}, "refreshed": False}
    # The dnf backend goes here with vendor_packages', chosen by the host's package manager.
    if running_kernel_packages(names, kernel) and not module.get_bin_path("apt-get"):
        module.fail_json(msg="no apt-get on this host; accepted: Debian or Ubuntu (dnf is not supported yet)", **result)
    try:
        found = check_running_kernel(Apt(module), names, kernel, module.params["needed_by"])
    except VendorPackagesError as problem:
        module.fail_json(msg=str(problem), **result)
    error = found.pop("error")
    result.update(found)
    if error:
        module.fail_json(msg=error, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
