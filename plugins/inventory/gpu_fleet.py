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
  regions:
    description:
      - Regions to list (C(aws), C(oci)), e.g. C([us-east-1, us-west-2]).
    type: list
    elements: str
  projects:
    description: Project ids to list (C(gcp)).
    type: list
    elements: str
  zones:
    description: Zones to list (C(gcp)); every zone of the projects when unset.
    type: list
    elements: str
  subscription_id:
    description: The subscription to list (C(azure)).
    type: str
  resource_groups:
    description: Resource groups to list (C(azure)); the whole subscription when unset.
    type: list
    elements: str
  parent_ids:
    description: Project (parent) ids to list (C(nebius)).
    type: list
    elements: str
  compartment_id:
    description: The compartment OCID to list (C(oci)).
    type: str
  profile:
    description:
      - The credentials profile (C(aws) in the shared config and credentials files, C(oci) in C(~/.oci/config));
        the SDK's default chain when unset.
    type: str
  endpoint_url:
    description:
      - The API endpoint; the SDK's default when unset. For C(aws), C(gcp), C(azure) and C(oci) an C(https://) URL,
        or C(http://) to a loopback address such as a local emulator; for C(nebius) the gRPC C(host:port) or URL.
    type: str
    aliases: [endpoint]
  path:
    description: The static fleet file (C(static)); a relative path is relative to this configuration file.
    type: str
  cloud_timeout:
    description:
      - Seconds one HTTP request to the cloud API may wait to connect and to read its answer (whole seconds, 1 to
        600). Applies to every source but C(static); an O(source_options) argument of the SDK overrides it.
      - An endpoint that accepts and never answers fails within about (O(cloud_retries) + 1) x this, plus the backoff.
    type: int
    default: 10
    env:
      - name: GPUFABRIC_CLOUD_TIMEOUT
    version_added: "0.9.0"
  cloud_retries:
    description:
      - Retries of one API call after a throttled answer, or a dropped connection or timeout where the SDK retries
        those (C(aws), C(azure)); 0 to 10. C(gcp) retries by time, for (this + 1) x O(cloud_timeout) seconds.
    type: int
    default: 2
    env:
      - name: GPUFABRIC_CLOUD_RETRIES
    version_added: "0.9.0"
  source_options:
    description:
      - Further arguments of the source's SDK client by their Python names, such as timeouts and retries
        (C(aws) max_attempts, retry_mode, connect_timeout, read_timeout; C(gcp) timeout, retry_timeout; ...), over
        what O(cloud_timeout) and O(cloud_retries) set.
      - An argument with its own option above is refused here; one the source does not take fails the inventory
        with the list of those it accepts.
    type: dict
    default: {}
  filters:
    description:
      - Keep the instances that match every key. A key is an instance field (C(name), C(instance_id),
        C(instance_type), C(state), C(region), C(zone), C(placement), C(private_ip), C(public_ip)) or
        C(tag:KEY) for a tag or label; its value is a pattern or a list of patterns, shell-style (C(p5.*)),
        any of which may match.
      - Applied by this plugin to what the source lists, the same for every cloud (C(amazon.aws.aws_ec2) passes
        its filters to the EC2 API instead). An empty mapping keeps every instance.
    type: dict
    default: {}
  include_filters:
    description:
      - A list of filters (as O(filters)); an instance that matches any of them is kept even when it does not
        match O(filters).
    type: list
    elements: dict
    default: []
  exclude_filters:
    description:
      - A list of filters (as O(filters)); an instance that matches any of them is dropped, whatever O(filters) and
        O(include_filters) say.
    type: list
    elements: dict
    default: []
  hostnames:
    description:
      - How hosts are named, in order of preference; the first that gives an instance a value that is a host name
        wins. Each entry is a key as in O(filters) (C(name), C(private_ip), C(tag:Name), ...) or a mapping with
        C(name), an optional C(prefix) key whose value goes first and a C(separator) (default C(_)).
      - An instance none of them names keeps its usual name (its name when that is a host name, else its id),
        with a warning; it is never dropped. Default, and when unset, that usual name.
    type: list
    elements: raw
    default: []
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
# fleet.gpu_fleet.yml: the p5 hosts of two regions, named by their Name tag, grouped by region.
plugin: gpufabric.cluster.gpu_fleet
source: aws
regions: [us-east-1, us-west-2]
profile: gpu-ops
source_options:
  read_timeout: 120  # a large account pages slowly
filters:
  instance_type: p5.*
  tag:team: [training, research]
exclude_filters:
  - tag:gpufabric: skip
hostnames:
  - tag:Name
  - private_ip
keyed_groups:
  - key: gpufabric_region
    prefix: region

---
# gcp.gpu_fleet.yml: two zones of one project, the a3-mega hosts plus anything labelled for the fabric.
plugin: gpufabric.cluster.gpu_fleet
source: gcp
projects: [my-training-project]
zones: [us-east5-a, us-east5-b]
filters:
  instance_type: a3-megagpu-8g
include_filters:
  - tag:fabric: tcpxo
hostnames:
  - name: name
    prefix: zone
    separator: "-"

---
# static.gpu_fleet.yml: hosts listed by hand in fleet.yml, beside this file.
plugin: gpufabric.cluster.gpu_fleet
source: static
path: fleet.yml
"""

from pathlib import Path

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fabric_catalog import (
    CatalogError,
    env_overrides,
    load_named_catalog,
)
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_base import DiscoveryError
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_inventory import build, json_ready
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_select import (
    SelectionError,
    check_hostnames,
    select,
)
from ansible_collections.gpufabric.cluster.plugins.plugin_utils.fleet_sources import (
    PLUGIN_SETTINGS,
    budget_options,
    check_budget,
    make_source,
)

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

    def _source_arguments(self, source, path):
        """The source's constructor arguments: its typed options, then source_options (SDK tuning)."""
        settings = PLUGIN_SETTINGS[source]
        arguments = {}
        for option in sorted({option for table in PLUGIN_SETTINGS.values() for option in table}):
            value = self.get_option(option)
            if value is None:
                continue
            if option not in settings:
                raise AnsibleParserError(
                    f"gpu_fleet: {option} does not apply to source {source}; it takes {', '.join(settings)}"
                )
            arguments[settings[option]] = value
        if "path" in arguments:
            # Not type path: Ansible would resolve it against the working directory, not this file.
            arguments["path"] = str(Path(path).parent / Path(arguments["path"]).expanduser())
        timeout_s, retries = self.get_option("cloud_timeout"), self.get_option("cloud_retries")
        check_budget(
            source,
            timeout_s,
            retries,
            ("cloud_timeout (or GPUFABRIC_CLOUD_TIMEOUT)", "cloud_retries (or GPUFABRIC_CLOUD_RETRIES)"),
        )
        arguments.update(budget_options(source, timeout_s, retries))
        for name, value in self.get_option("source_options").items():
            typed = next((option for option, argument in settings.items() if argument == name), None)
            if typed is not None:
                raise AnsibleParserError(f"gpu_fleet: source_options.{name}: set it as the option {typed} instead")
            arguments[name] = value
        return arguments

    def _discover(self, path):
        source = self.get_option("source")
        option = f"option catalog_files of {path}"
        overrides = [*env_overrides(), *((option, Path(f)) for f in self.get_option("catalog_files"))]
        try:
            hostnames = check_hostnames(self.get_option("hostnames"))
            filters = [self.get_option(name) for name in ("filters", "include_filters", "exclude_filters")]
            select([], *filters)  # checked before the cloud is asked: a typo fails at once
            catalog = load_named_catalog(overrides)
            instances = select(make_source(source, self._source_arguments(source, path)).instances(), *filters)
        except (CatalogError, DiscoveryError, SelectionError) as exc:
            raise AnsibleParserError(f"gpu_fleet: {exc}") from None
        inventory, warnings = build(
            instances,
            catalog,
            public=self.get_option("public"),
            include_non_gpu=self.get_option("include_non_gpu"),
            include_stopped=self.get_option("include_stopped"),
            hostnames=hostnames,
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
