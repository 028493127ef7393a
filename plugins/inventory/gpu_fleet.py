# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_fleet
author: gpufabric developers (!UNKNOWN)
version_added: "0.9.0"
short_description: GPU fleet from cloud APIs, classified against the gpufabric fabric catalog
description:
  - Lists instances through a cloud's official SDK (AWS, GCP, Azure, Nebius, OCI) or a static YAML file,
    keeps the GPU hosts, and gives each the C(gpufabric_*) variables and groups that C(gpufabric inventory build) writes
    (C(fabric_<fabric>), C(profile_<cloud>_<type>), C(placement_<cloud>_<unit>), C(cloud_<cloud>)).
  - Values the cloud reports (names, tags, labels, placement names, ids) are marked unsafe, so Ansible never
    templates them.
  - The configuration file must end in C(.gpu_fleet.yml) or C(.gpu_fleet.yaml).
extends_documentation_fragment:
  - constructed
  - inventory_cache
options:
  plugin:
    description: The name of this plugin.
    required: true
    choices: [gpufabric.cluster.gpu_fleet]
    type: str
  source:
    description: Where the fleet comes from.
    required: true
    choices: [aws, gcp, azure, nebius, oci, static]
    type: str
  source_options:
    description:
      - Arguments of the source, by their Python names. The main ones are C(aws) regions, endpoint_url, profile;
        C(gcp) projects, zones, endpoint; C(azure) subscription_id, resource_groups, endpoint; C(nebius) parent_ids,
        endpoint; C(oci) compartment_id, regions, endpoint; C(static) path (relative to this file).
      - An option the source does not take fails the inventory with the list of those it accepts.
    type: dict
    default: {}
  public:
    description: Connect to public addresses instead of private ones.
    type: bool
    default: false
  include_non_gpu:
    description: Keep instances whose type is not a GPU type (group C(non_gpu)).
    type: bool
    default: false
  include_stopped:
    description: Keep instances that are not running.
    type: bool
    default: false
  catalog_files:
    description: Override catalog files merged over the built-in catalog, in order.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
# fleet.gpu_fleet.yml
plugin: gpufabric.cluster.gpu_fleet
source: aws
source_options:
  regions: [us-east-1, us-west-2]
keyed_groups:
  - key: gpufabric_region
    prefix: region
"""

from pathlib import Path

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_catalog import (
    CatalogError,
    load_catalog,
    override_files_from_env,
)
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import DiscoveryError
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_inventory import build, json_ready
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_sources import make_source

UNSAFE_KEY = "__ansible_unsafe"


def _ansible_value(value):
    """JSON-ready fleet data to Ansible values: {"__ansible_unsafe": text} becomes unsafe text."""
    if isinstance(value, dict) and set(value) == {UNSAFE_KEY}:
        return wrap_var(value[UNSAFE_KEY])
    if isinstance(value, dict):
        return {_ansible_value(key): _ansible_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_ansible_value(item) for item in value]
    return value


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "gpufabric.cluster.gpu_fleet"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith((".gpu_fleet.yml", ".gpu_fleet.yaml"))

    def _discover(self, path):
        options = dict(self.get_option("source_options"))
        source = self.get_option("source")
        if source == "static" and "path" in options:
            options["path"] = str(Path(path).parent / options["path"])
        overrides = [*override_files_from_env(), *(Path(f) for f in self.get_option("catalog_files"))]
        try:
            catalog = load_catalog(overrides)
            instances = list(make_source(source, options).instances())
        except (CatalogError, DiscoveryError) as exc:
            raise AnsibleParserError(f"gpu_fleet: {exc}") from None
        inventory, warnings = build(
            instances,
            catalog,
            public=self.get_option("public"),
            include_non_gpu=self.get_option("include_non_gpu"),
            include_stopped=self.get_option("include_stopped"),
        )
        for warning in warnings:
            self.display.warning(f"gpu_fleet: {warning}")
        # JSON-ready, so a cache plugin that stores JSON keeps the unsafe marks.
        return json_ready(inventory)

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        cache_key = self.get_cache_key(path)
        use_cache = self.get_option("cache") and cache
        update_cache = self.get_option("cache") and not cache
        fleet = None
        if use_cache:
            try:
                fleet = self._cache[cache_key]
            except KeyError:
                update_cache = True
        if fleet is None:
            fleet = self._discover(path)
        if update_cache:
            self._cache[cache_key] = fleet
        self._populate(fleet)

    def _populate(self, fleet):
        strict = self.get_option("strict")
        for group, body in fleet.items():
            if group in ("_meta", "all", "ungrouped"):
                continue
            self.inventory.add_group(group)
            for host in body["hosts"]:
                self.inventory.add_host(host, group=group)
        for host, variables in fleet["_meta"]["hostvars"].items():
            self.inventory.add_host(host)
            for key, value in variables.items():
                self.inventory.set_variable(host, key, _ansible_value(value))
            hostvars = self.inventory.get_host(host).get_vars()
            self._set_composite_vars(self.get_option("compose"), hostvars, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, host, strict=strict)
