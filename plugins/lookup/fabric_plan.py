# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: fabric_plan
author: gpufabric developers (!UNKNOWN)
version_added: "0.1.0"
short_description: Resolve a host's fabric catalog profile into its plan
description:
  - Loads the gpufabric fabric catalog (built-in profiles, then the override files named in
    O(catalog_files) and in the C(GPUFABRIC_CATALOG) environment variable of the controller),
    validates it, and returns the plan for one host.
  - The plan is a dictionary with C(profile), C(fabric), C(tier), C(roles), C(roles_unavailable),
    C(env), C(gpus) (model, count, nvswitch), C(nics) (the profile's GPU-network and
    management NICs), C(sriov), C(hardware) (the profile's C(fabric), C(gpu), C(nics) and C(sriov) sections, what
    the C(fabric_findings) filter compares the host's facts with), C(bandwidth) (the profile's bandwidth with the
    tier's thresholds, what C(nccl_tests) judges a run by), C(resolved_by), C(unmanaged) and C(warnings);
    C(profile) is C(unknown) when nothing matches (then C(hardware) and C(bandwidth) are empty).
  - C(unmanaged) is null for a host gpufabric manages, else C(code) (V(no_profile), V(unknown_profile) or
    V(excluded)) and C(reason); site.yml leaves such a host alone and reports it.
  - This is the same code that C(gpufabric plan) runs, so the playbook applies what the plan shows.
options:
  profile:
    description:
      - Catalog profile name such as C(gcp/a3-megagpu-8g); wins over O(cloud) and O(instance_type).
      - O(profile), O(cloud), O(instance_type) and O(tier) take the host vars as they are; one that is not text (a
        list, a mapping) fails with an error naming the host var, its value and what is accepted.
    type: raw
    default: ""
  cloud:
    description: Cloud of the host (C(gcp), C(aws), C(azure), C(nebius), C(oci), C(baremetal)).
    type: raw
    default: ""
  instance_type:
    description: Instance type (machine type, VM size, shape or preset platform) of the host.
    type: raw
    default: ""
  tier:
    description: C(best) or C(standard).
    type: raw
    default: best
  managed:
    description:
      - The host var C(gpufabric_managed). V(false) excludes the host on purpose; its plan's C(unmanaged) says so.
    type: bool
    default: true
  catalog_files:
    description: Override catalog files merged over the built-in catalog, in order.
    type: list
    elements: str
    default: []
  unknown_hosts_profile:
    description:
      - The profile of a host the catalog has no profile for (the variable C(gpufabric_unknown_hosts_profile));
        the host's plan is then that profile's, with the same O(tier) and O(managed). Empty leaves such a host
        unknown.
      - A name the catalog does not have fails the lookup, naming it.
    type: str
    default: ""
  require_profile:
    description:
      - Fail, naming O(host) and why, when the host has no catalog profile (after O(unknown_hosts_profile)).
      - V(false) returns the plan with C(profile) V(unknown) and its C(unmanaged) verdict (site.yml reports such a
        host NOT MANAGED).
    type: bool
    default: false
  nic_names:
    description:
      - The host var C(gpufabric_nic_names), the names the host's image gives the profile's NICs, C(gpu) and
        C(management) each a list in PCI order, and C(gpu_rdma), the RDMA device names of ConnectX GPU NICs, in
        PCI order. Where given, the plan's environment placeholders (C({nics.gpu}),
        ...) are filled from it; else the plan role fills them from the host's hardware (docs/catalog.md).
    type: raw
    default: null
  image:
    description:
      - The host var C(gpufabric_image), the catalog image the host boots. The plan's C(image) then names it, with the
        host-stack roles that adopt its stack (site.yml switches them to adopt). A name the catalog does not have
        fails the lookup, naming it. Empty (the default) names no image.
    type: str
    default: ""
  host:
    description: The host's inventory name, for the O(require_profile) error.
    type: str
    default: this host
"""

EXAMPLES = r"""
- name: Plan this host
  ansible.builtin.set_fact:
    gpufabric_plan: "{{ lookup('gpufabric.cluster.fabric_plan', profile='gcp/a3-megagpu-8g', tier='best') }}"
"""

RETURN = r"""
_raw:
  description:
    - One plan dictionary, with the keys C(profile), C(fabric), C(tier), C(roles), C(roles_unavailable), C(env),
      C(gpus), C(nics), C(sriov), C(hardware), C(bandwidth), C(nic_names), C(nic_placeholders), C(resolved_by),
      C(image), C(unmanaged) and C(warnings).
  type: list
  elements: dict
"""

from pathlib import Path

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_catalog import (
    CatalogError,
    env_overrides,
    load_named_catalog,
)
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_plan import UNKNOWN, PlanError, plan_host


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        option = "lookup option catalog_files (site.yml: the variable gpufabric_catalog_files)"
        overrides = [*env_overrides(), *((option, Path(f)) for f in self.get_option("catalog_files"))]
        try:
            catalog = load_named_catalog(overrides)
            hostvars = {
                "gpufabric_profile": self.get_option("profile"),
                "gpufabric_cloud": self.get_option("cloud"),
                "gpufabric_instance_type": self.get_option("instance_type"),
                "gpufabric_managed": self.get_option("managed"),
                "gpufabric_nic_names": self.get_option("nic_names"),
                "gpufabric_image": self.get_option("image"),
            }
            plan = self._plan(hostvars, catalog)
        except CatalogError as exc:
            raise AnsibleLookupError(f"gpufabric catalog: {exc}") from None
        except PlanError as exc:  # a host var of the wrong type or an unknown tier
            raise AnsibleLookupError(f"gpufabric plan: {exc}") from None
        if self.get_option("require_profile") and plan["profile"] == UNKNOWN:
            raise AnsibleLookupError(
                f"{self.get_option('host')} has no fabric plan: {plan['unmanaged']['reason']}. Set the host var"
                " gpufabric_profile (`gpufabric catalog list` shows the accepted names), or gpufabric_cloud with"
                " gpufabric_instance_type. Nothing was changed."
            )
        return [plan]

    def _plan(self, hostvars, catalog):
        """The host's plan; for a host the catalog does not know, the operator's unknown_hosts_profile if set."""
        tier = self.get_option("tier")
        plan = plan_host(hostvars, catalog, tier=tier, tier_source="lookup option tier")
        fallback = self.get_option("unknown_hosts_profile")
        if plan["profile"] != UNKNOWN or not fallback:
            return plan
        if catalog.get(fallback) is None:
            raise AnsibleLookupError(
                f"gpufabric_unknown_hosts_profile {fallback!r} is not in the fabric catalog;"
                " `gpufabric catalog list` shows the accepted names."
            )
        opted_in = {
            "gpufabric_profile": fallback,
            "gpufabric_managed": hostvars["gpufabric_managed"],
            "gpufabric_nic_names": hostvars["gpufabric_nic_names"],
            "gpufabric_image": hostvars["gpufabric_image"],
        }
        return plan_host(opted_in, catalog, tier=tier, tier_source="lookup option tier")
