# SPDX-License-Identifier: Apache-2.0
"""The supply chain `gpufabric plan` shows per host: the keys, repositories and packages its roles will configure.

Computed by the roles' own code, not a description of it: for each role of the host's plan, the role's settings
(the ``<role>__settings`` mapping its plan task passes to ``gpufabric.cluster.<role>_plan``) are rendered by
Ansible's templar over the variables the role would see (its defaults, the host's inventory variables, site.yml's
play and role variables, its vars files), then handed to the same plan filter the role calls. Its ``supply``
(plugins/module_utils/supply_chain.py) is what the role's tasks give repo_key and vendor_packages.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from jinja2 import nodes

from gpufabric import os_targets
from gpufabric.collection import collection_root, filter_plugin, module_utils
from gpufabric.inventory import as_play_sees

SITE_PLAYBOOK = "playbooks/site.yml"
ROLES_TASK = "Run the plan's roles in order"


def host_supply(
    host_plan: dict[str, Any],
    hostvars: dict[str, Any],
    facts: dict[str, Any],
    os_name: str,
    os_from: str,
    memo: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """{"os", "os_from", "roles": {role: [PackageStep]}, "apt_pins": {role: [AptPin]},
    "artifacts": {role: [Artifact]}, "adopt": {role: Adoption}, "errors": [...], "warnings": [...], "note"} for one
    host. A role in adopt mode (plugins/module_utils/adopt.py) lists what it found on the image and what it installs
    because the image lacks it; without --probe the image's packages are not known here. ``warnings`` are what the
    roles' plans warn of, as the roles print them at apply (rdma_stack adopting the DOCA-OFED an image ships for the
    inbox flavor, say), each "<role>: <warning>".

    ``hostvars`` are the inventory's variables of the host as ansible-inventory lists them (an unsafe value,
    {"__ansible_unsafe": text}, stays untrusted: never templated, as in a play).

    ``memo`` (one dict per fleet, kept by the caller) holds the roles' results by what they were computed from: the
    plan, the facts and the host variables the roles' templates can reach (``_memo_key``). Hosts alike in those get
    the same objects, which nobody changes; a fleet of one profile renders each role's templates once, not per host.
    """
    result = unknown_os("") | {"os": os_name, "os_from": os_from}
    if "kernel" not in facts:
        result["note"] = (
            "packages named after the running kernel (linux-headers-*, linux-modules-extra-*) show with --probe"
        )
    if host_plan.get("unmanaged"):
        return result
    key = _memo_key(host_plan, hostvars, facts) if memo is not None else None
    if memo is None or key is None:
        return result | _plan_roles(host_plan, hostvars, facts)
    if key not in memo:
        memo[key] = _plan_roles(host_plan, hostvars, facts)
    return result | memo[key]


def _plan_roles(host_plan: dict[str, Any], hostvars: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """The roles' part of host_supply: {"roles", "apt_pins", "artifacts", "adopt", "errors", "warnings"}."""
    result: dict[str, Any] = {"roles": {}, "apt_pins": {}, "artifacts": {}, "adopt": {}, "errors": [], "warnings": []}
    if host_plan.get("nic_placeholders") and host_plan.get("nic_names") is None:
        # What a role installs does not depend on the NICs' names, which only the host knows (the plan role reads
        # them): plan the roles with stand-in names, as if they had been read.
        host_plan = module_utils("fabric_nics").resolve_with_names(
            host_plan, module_utils("fabric_nics").stand_in_names(host_plan["hardware"]["nics"])
        )
    roles = [role for role in host_plan.get("roles", []) if role not in host_plan.get("roles_unavailable", [])]
    for role in roles:
        settings_template = role_settings(role)
        plan_filter = plan_filters().get(f"{role}_plan")
        if settings_template is None or plan_filter is None:
            continue
        variables = _role_variables(role, host_plan, hostvars, facts)
        try:
            settings = Templar(loader=_loader(), variables=variables).template(settings_template)
            role_plan = plan_filter(settings, plan=host_plan, facts=facts)
        except AnsibleError as exc:  # an undefined variable (e.g. a required version not set) or a bad one
            result["errors"].append(f"{role}: {exc.message}")
            continue
        except (TypeError, ValueError) as exc:  # a value of the wrong type, which the role would fail on too
            result["errors"].append(f"{role}: {type(exc).__name__}: {exc}")
            continue
        result["warnings"] += [f"{role}: {warning}" for warning in role_plan.get("warnings") or []]
        adoption = role_plan.get("adopt") or {}
        if adoption.get("mode") == "adopt":
            result["adopt"][role] = adoption
        if role_plan.get("artifacts") and not role_plan.get("errors"):
            # Tarballs checked by their SHA256 and images pulled by digest: fetched outside a package repository.
            result["artifacts"][role] = role_plan["artifacts"]
        if "supply" not in role_plan:
            continue
        if role_plan.get("apt_pins") and not role_plan.get("errors"):
            # APT preferences written before the packages: a repository lowered (adopt), DOCA's dkms pinned away.
            result["apt_pins"][role] = role_plan["apt_pins"]
        # A role that refuses its inputs installs nothing: its refusal is shown, not a guess at its packages.
        result["errors"] += [f"{role}: {error}" for error in role_plan.get("errors", [])]
        if role_plan["supply"] and not role_plan.get("errors"):
            result["roles"][role] = role_plan["supply"]
    return result


# Names whose use makes a role's result depend on more than the variables a template names, or on when it is
# rendered: such a template is rendered for every host (no memo).
_UNBOUNDED_NAMES = frozenset({"vars", "hostvars", "lookup", "query", "q", "now", "omit"})
_UNBOUNDED_FILTERS = frozenset({"random", "shuffle", "password_hash", "extract"})
_UNBOUNDED = "*"  # in a set of reached names: no memo for this host
_READS_NVLINK = "gpufabric_plan.nvlink.domain"  # in a set of reached names: a template there may read the domain


def _memo_key(host_plan: dict[str, Any], hostvars: dict[str, Any], facts: dict[str, Any]) -> str | None:
    """What host_supply's roles compute from, as text: the plan, the facts and the host variables (as
    ansible-inventory lists them) that the roles' templates can reach through any chain of variables. None where a
    template reaches further than its names say (``_UNBOUNDED_NAMES``, a template that does not parse, ...)."""
    reached: set[str] = set()
    roles_dir = _roles_dir()
    for role in host_plan.get("roles", []):
        if role not in host_plan.get("roles_unavailable", []) and role_settings(role) is not None:
            reached |= _reached(role, _os_vars_file(roles_dir / role, facts), hostvars)
    if _UNBOUNDED in reached:
        return None
    if _READS_NVLINK not in reached and (host_plan.get("nvlink") or {}).get("domain") is not None:
        # The hosts of a rack-scale fleet differ in their NVLink domain, which no role's supply reads: no template
        # the settings reach says "domain", and the plan filters never read the plan's nvlink (tests/unit/
        # test_plan_scale.py computes two domains' hosts alone and compares).
        host_plan = {**host_plan, "nvlink": {**host_plan["nvlink"], "domain": None}}
    inventory = {name: hostvars[name] for name in sorted(reached) if name in hostvars}
    try:
        # Unsorted: hosts alike build their plans in the same order (another order only misses the memo).
        return json.dumps([host_plan, facts, inventory], allow_nan=False)
    except (TypeError, ValueError):
        return None


def _reached(role: str, os_file: Path | None, hostvars: dict[str, Any]) -> frozenset[str] | set[str]:
    """Every variable name the role's settings can reach for this host: the names they use, the names the values of
    those use (role and site.yml variables, then the host's own inventory values), and so on."""
    reached = _static_reached(role, os_file)
    # The host's inventory values add names only where one the settings reach is itself a template.
    if not any(_template_names(hostvars[name]) for name in reached if name in hostvars):
        return reached
    graph = _static_graph(role, os_file)
    return _closure(graph, _settings_names(role), {name: _template_names(value) for name, value in hostvars.items()})


@cache
def _static_reached(role: str, os_file: Path | None) -> frozenset[str]:
    """The names the role's settings reach through the role's and site.yml's variables alone."""
    return frozenset(_closure(_static_graph(role, os_file), _settings_names(role), {}))


def _closure(graph: dict[str, frozenset[str]], start: frozenset[str], extra: dict[str, frozenset[str]]) -> set[str]:
    seen: set[str] = set()
    stack = list(start)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stack.extend(graph.get(name, ()))
        stack.extend(extra.get(name, ()))
    return seen


@cache
def _roles_dir() -> Path:
    return collection_root() / "roles"


@cache
def _settings_names(role: str) -> frozenset[str]:
    return _template_names(role_settings(role))


@cache
def _static_graph(role: str, os_file: Path | None) -> dict[str, frozenset[str]]:
    """For each variable the role's templates see that is not the host's own: the names its value uses. Names that
    several layers define use the names of every layer (more than needed is only a missed memo)."""
    role_dir = collection_root() / "roles" / role
    play_vars, include_role_vars = _site_variables()
    graph: dict[str, frozenset[str]] = {}
    for layer in (
        _load(role_dir / "defaults" / "main.yml"),
        play_vars,
        _load(role_dir / "vars" / "main.yml"),
        _load(os_file) if os_file is not None else None,
        include_role_vars,
    ):
        for name, value in (layer or {}).items():
            graph[name] = graph.get(name, frozenset()) | _template_names(value)
    return graph


def _template_names(value: Any) -> frozenset[str]:
    """The variable names the templates in ``value`` use (all of them: more than needed is only a missed memo),
    with ``hostvars[inventory_hostname].name`` counted as ``name``; _UNBOUNDED for what names cannot bound."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:  # ansible-inventory's unsafe text: never a template
            return frozenset()
        return frozenset().union(*(_template_names(item) for item in value.values()))
    if isinstance(value, list):
        return frozenset().union(*(_template_names(item) for item in value))
    if isinstance(value, str) and ("{{" in value or "{%" in value or "{#" in value):
        return _string_names(str(value))
    return frozenset()


@cache
def _string_names(text: str) -> frozenset[str]:
    try:
        tree = _jinja_parser().parse(text)
    except jinja2.TemplateError:
        return frozenset({_UNBOUNDED})
    if any(True for _node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends))):
        return frozenset({_UNBOUNDED})
    names: set[str] = set()
    own = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        # hostvars[inventory_hostname].x, or ['x']: the host's own variable x (site.yml reads it so).
        inner = node.node  # type: ignore[attr-defined]
        if (
            isinstance(inner, nodes.Getitem)
            and isinstance(inner.node, nodes.Name)
            and inner.node.name == "hostvars"
            and isinstance(inner.arg, nodes.Name)
            and inner.arg.name == "inventory_hostname"
        ):
            attribute = node.attr if isinstance(node, nodes.Getattr) else getattr(node.arg, "value", None)  # type: ignore[attr-defined]
            if not isinstance(attribute, str):
                return frozenset({_UNBOUNDED})
            names |= {attribute, "inventory_hostname"}
            own.add(id(inner.node))
    for name in tree.find_all(nodes.Name):
        if name.name == "hostvars" and id(name) in own:
            continue
        names.add(_UNBOUNDED if name.name in _UNBOUNDED_NAMES else name.name)
    if any(node.name in _UNBOUNDED_FILTERS for node in tree.find_all(nodes.Filter)):
        names.add(_UNBOUNDED)
    if "domain" in text:  # whether a host has multi-node NVLink is read (site.yml), its domain is not
        names.add(_READS_NVLINK)
    return frozenset(names)


@cache
def _jinja_parser() -> jinja2.Environment:
    """Parses only (no filters or tests needed): Ansible's templates use Jinja's default syntax."""
    return jinja2.Environment()


@cache
def _loader() -> DataLoader:
    return DataLoader()


@cache
def _load(path: Path) -> Any:
    """A YAML file as Ansible loads it: its strings trusted templates, as a role's own files are. Read once per run
    (the same object each time: nobody changes it; the templar renders copies)."""
    return _loader().load_from_file(str(path), trusted_as_template=True) if path.is_file() else None


@cache
def plan_filters() -> dict[str, Any]:
    """Every ``<role>_plan`` filter of the collection, by name: the functions the roles call."""
    filters: dict[str, Any] = {}
    for path in sorted((collection_root() / "plugins" / "filter").glob("*.py")):
        module = filter_plugin(path.stem)
        if hasattr(module, "FilterModule"):
            filters.update(
                {name: function for name, function in module.FilterModule().filters().items() if name.endswith("_plan")}
            )
    return filters


@cache
def role_settings(role: str) -> dict[str, Any] | None:
    """The ``<role>__settings`` mapping of the role's plan task, as written (templates), or None."""
    for path in sorted((collection_root() / "roles" / role / "tasks").glob("*.yml")):
        for task in _load(path) or []:
            settings = (task.get("vars") or {}).get(f"{role}__settings") if isinstance(task, dict) else None
            if isinstance(settings, dict):
                return settings
    return None


@cache
def _site_variables() -> tuple[dict[str, Any], dict[str, Any]]:
    """site.yml's play variables and the variables it gives every role (its include_role task's vars)."""
    play = (_load(collection_root() / SITE_PLAYBOOK) or [{}])[0]
    role_vars = next((task.get("vars") or {} for task in play.get("tasks", []) if task.get("name") == ROLES_TASK), {})
    return play.get("vars") or {}, role_vars


def _role_variables(
    role: str, host_plan: dict[str, Any], hostvars: dict[str, Any], facts: dict[str, Any]
) -> dict[str, Any]:
    """What the role's templates see, lowest precedence first: role defaults, inventory, play vars, role vars
    (vars/main.yml and the vars file for the host's OS, which the role's plan task includes), include_role vars."""
    role_dir = collection_root() / "roles" / role
    play_vars, include_role_vars = _site_variables()
    variables: dict[str, Any] = {}
    variables.update(_load(role_dir / "defaults" / "main.yml") or {})
    inventory = {name: as_play_sees(value, trust_as_template) for name, value in hostvars.items()}
    variables.update(inventory)
    variables.update(play_vars)
    variables.update(_load(role_dir / "vars" / "main.yml") or {})
    os_file = _os_vars_file(role_dir, facts)
    if os_file is not None:
        variables.update(_load(os_file))
    variables.update(include_role_vars)
    variables.update(
        {
            "gpufabric_plan": host_plan,
            "ansible_facts": facts,
            "inventory_hostname": str(hostvars.get("inventory_hostname", "")),
            # site.yml reads a host's own inventory value through hostvars where its role var would shadow it.
            "hostvars": {str(hostvars.get("inventory_hostname", "")): inventory},
            "role_path": str(role_dir),
        }
    )
    return variables


def _os_vars_file(role_dir: Path, facts: dict[str, Any]) -> Path | None:
    """The role's vars file for the host's OS that its plan task includes, most specific first; None without one."""
    names = (
        f"{facts.get('distribution')}-{facts.get('distribution_major_version')}.yml",
        f"{facts.get('distribution')}.yml",
        f"{facts.get('os_family')}.yml",
    )
    return _first_vars_file(role_dir, names)


@cache
def _first_vars_file(role_dir: Path, names: tuple[str, ...]) -> Path | None:
    return next((role_dir / "vars" / name for name in names if _load(role_dir / "vars" / name) is not None), None)


def unknown_os(note: str) -> dict[str, Any]:
    """The supply section of a host whose OS is not known: nothing is computed, the note says why."""
    return {
        "os": None,
        "os_from": None,
        "roles": {},
        "apt_pins": {},
        "artifacts": {},
        "adopt": {},
        "errors": [],
        "warnings": [],
        "note": note,
    }


def host_facts(
    hostvars: dict[str, Any], probed: dict[str, Any] | None, image: dict[str, Any] | None = None
) -> tuple[dict[str, Any] | None, str, str]:
    """(facts, os name, where it came from) for one host: a probe's os-release, kernel and installed stack packages
    win over the host variable gpufabric_os, which wins over the OS of the catalog image the host boots; (None, "",
    reason) when none says."""
    if probed is not None:
        host = probed.get("host") or {}
        name = os_targets.target_of(host.get("os") or {})
        if name is None:
            return None, "", f"probe: os-release {host.get('os')} is not one of {', '.join(os_targets.OS_TARGETS)}"
        facts: dict[str, Any] = dict(os_targets.facts_for(name, "probe"))
        if host.get("kernel"):
            facts["kernel"] = host["kernel"]
        if host.get("packages") is not None:
            # The shape ansible.builtin.package_facts gives the roles: name -> [{"version": ...}].
            facts["packages"] = {package: [{"version": version}] for package, version in host["packages"].items()}
        if host.get("efa_installer") is not None:
            # The EFA installer's record, which the aws_efa role's adopt mode decides from (aws_efa.PROBED_MARKER).
            facts[module_utils("aws_efa").PROBED_MARKER] = host["efa_installer"]
        return facts, name, "probe"
    declared = hostvars.get("gpufabric_os")
    if declared is None:
        if image is not None:
            where = f"image {image['name']}"
            return os_targets.facts_for(image["os"], where), image["os"], where
        return None, "", "set host variable gpufabric_os or gpufabric_image, or run with --probe"
    name = as_play_sees(declared)  # an inventory plugin's value is marked unsafe: its text is the name
    return os_targets.facts_for(name, "host variable gpufabric_os"), str(name), "gpufabric_os"
