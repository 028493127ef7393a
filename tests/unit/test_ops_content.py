# SPDX-License-Identifier: Apache-2.0
"""Scheduling and AWX content: the systemd timer, the Kubernetes CronJob, the execution environment,
collections/requirements.yml and the Packer template.

Nothing here starts a unit, applies a manifest, builds an image or builds with Packer: the files are
checked by the tools that exist here (systemd-analyze, ansible-builder create, ansible-galaxy on the
directory source, packer validate) and structurally against what their consumers require.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SYSTEMD = REPO / "examples" / "systemd"
SERVICE = SYSTEMD / "gpufabric-drift.service"
TIMER = SYSTEMD / "gpufabric-drift.timer"
CRONJOB = REPO / "examples" / "kubernetes" / "drift-cronjob.yaml"
EE = REPO / "execution-environment.yml"
REQUIREMENTS = REPO / "collections" / "requirements.yml"
PACKER = REPO / "examples" / "packer" / "gpufabric-bake.pkr.hcl"
PACKER_VERSIONS = PACKER.parent / "versions.pkr.hcl"
OPERATIONS = REPO / "docs" / "operations.md"
NAVIGATOR = REPO / "ansible-navigator.yml"

DRIFT_ARGS = [
    "drift",
    "-i",
    "/etc/gpufabric/inventory.yml",
    "--json-file",
    "/var/lib/gpufabric/drift.json",
    "--prom",
    "/var/lib/node_exporter/textfile_collector/gpufabric_drift.prom",
]
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def unit_sections(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file as section -> key -> values (keys such as Environment= repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, f"{path.name}:{number}: not a key=value line in a section: {raw!r}"
        key, value = line.split("=", 1)
        current.setdefault(key, []).append(value)
    return sections


def one(section: dict[str, list[str]], key: str) -> str:
    values = section.get(key, [])
    assert len(values) == 1, f"{key}= appears {len(values)} times; expected once"
    return values[0]


def constraints() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, _sep, version = line.partition("==")
        pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def pip_pin(requirement: str) -> tuple[str, str]:
    name, sep, version = requirement.partition("==")
    assert sep, f"{requirement!r} is not pinned with =="
    return name.strip().lower().replace("_", "-"), version.strip()


# --- systemd ----------------------------------------------------------------------------------------------


def test_service_runs_drift_unprivileged_as_a_oneshot():
    service = unit_sections(SERVICE)["Service"]
    assert one(service, "Type") == "oneshot"
    assert one(service, "User") not in ("root", "0")
    assert one(service, "ExecStart").split() == ["/opt/gpufabric/bin/gpufabric", *DRIFT_ARGS]
    # Drift found (2) is an answer, not a broken check.
    assert one(service, "SuccessExitStatus").split() == ["2"]
    environment = dict(value.split("=", 1) for value in service["Environment"])
    assert environment["HOME"] == "/var/lib/gpufabric" == "/var/lib/" + one(service, "StateDirectory")
    # gpufabric's state (runs, fact cache) in the StateDirectory, its collection link in the CacheDirectory.
    assert environment["XDG_STATE_HOME"] + "/gpufabric" == "/var/lib/" + one(service, "StateDirectory")
    assert environment["XDG_CACHE_HOME"] + "/gpufabric" == "/var/cache/" + one(service, "CacheDirectory")
    key = environment["ANSIBLE_PRIVATE_KEY_FILE"]
    # ProtectHome=true hides /home and /root: a key there would be unreadable.
    assert not key.startswith(("/home/", "/root/"))


def test_service_hardening_keeps_ssh_and_the_outputs_working():
    service = unit_sections(SERVICE)["Service"]
    for key in ("NoNewPrivileges", "PrivateTmp", "ProtectHome", "RestrictSUIDSGID", "ProtectKernelModules"):
        assert one(service, key) == "true", key
    assert one(service, "ProtectSystem") == "strict"
    assert one(service, "CapabilityBoundingSet") == ""
    # ssh needs the network: no private network, no IP deny list, the inet families allowed.
    assert "PrivateNetwork" not in service and "IPAddressDeny" not in service
    families = one(service, "RestrictAddressFamilies").split()
    assert {"AF_INET", "AF_INET6", "AF_UNIX"} <= set(families)
    # Under ProtectSystem=strict every output directory must be writable explicitly or be the state dir.
    writable = [*one(service, "ReadWritePaths").split(), "/var/lib/" + one(service, "StateDirectory")]
    for output in (DRIFT_ARGS[4], DRIFT_ARGS[6]):
        assert any(output.startswith(directory + "/") for directory in writable), output


def test_timer_is_nightly_randomized_and_persistent():
    sections = unit_sections(TIMER)
    timer = sections["Timer"]
    assert re.fullmatch(r"\*-\*-\* \d\d:\d\d:\d\d", one(timer, "OnCalendar"))
    assert one(timer, "RandomizedDelaySec")
    assert one(timer, "Persistent") == "true"
    assert one(timer, "Unit") == SERVICE.name
    assert one(sections["Install"], "WantedBy") == "timers.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed on this machine")
def test_systemd_analyze_verify_accepts_the_units(tmp_path):
    # verify checks that ExecStart's program exists; point it at a stand-in and keep everything else.
    stand_in = tmp_path / "gpufabric"
    stand_in.write_text("#!/bin/sh\nexit 0\n")
    stand_in.chmod(0o755)
    (tmp_path / SERVICE.name).write_text(SERVICE.read_text().replace("/opt/gpufabric/bin/gpufabric", str(stand_in)))
    shutil.copy(TIMER, tmp_path / TIMER.name)
    result = subprocess.run(
        ["systemd-analyze", "verify", SERVICE.name, TIMER.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    # It exits 0 on unknown keys and bad values too, and only says so: any output is a finding.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


# --- Kubernetes -------------------------------------------------------------------------------------------


def cronjob_objects() -> dict[str, dict]:
    objects = [doc for doc in yaml.safe_load_all(CRONJOB.read_text()) if doc is not None]
    by_kind = {}
    for obj in objects:
        # What every object needs (ObjectMeta: name is required), names as the API server accepts them.
        assert {"apiVersion", "kind", "metadata"} <= obj.keys(), obj
        assert DNS_1123_SUBDOMAIN.match(obj["metadata"]["name"]), obj["metadata"]["name"]
        assert obj["kind"] not in by_kind, f"two {obj['kind']} objects"
        by_kind[obj["kind"]] = obj
    return by_kind


def test_cronjob_required_fields_and_policies():
    cronjob = cronjob_objects()["CronJob"]
    assert cronjob["apiVersion"] == "batch/v1"
    spec = cronjob["spec"]
    # CronJobSpec requires schedule and jobTemplate; JobSpec requires template; PodSpec requires containers.
    assert len(spec["schedule"].split()) == 5
    assert spec["concurrencyPolicy"] == "Forbid"
    assert isinstance(spec["successfulJobsHistoryLimit"], int) and spec["successfulJobsHistoryLimit"] >= 1
    assert isinstance(spec["failedJobsHistoryLimit"], int) and spec["failedJobsHistoryLimit"] >= 1
    job = spec["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    # A Job's pods may not use restartPolicy Always; a podFailurePolicy needs Never.
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["name"] and container["image"]
    rule = job["podFailurePolicy"]["rules"][0]
    assert rule["onExitCodes"] == {"containerName": container["name"], "operator": "In", "values": [2]}
    assert rule["action"] == "FailJob"


def test_cronjob_wires_inventory_key_and_reports():
    objects = cronjob_objects()
    pod = objects["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["gpufabric"]
    args = container["args"]
    assert args[0] == "drift"
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    assert set(mounts.values()) <= volumes.keys()

    def volume_at(path: str) -> dict:
        directory, _sep, filename = path.rpartition("/")
        assert directory in mounts, f"{path}: no volume mounted at {directory}"
        return volumes[mounts[directory]] | {"file": filename}

    inventory = volume_at(args[args.index("-i") + 1])
    config_map = objects["ConfigMap"]
    assert inventory["configMap"]["name"] == config_map["metadata"]["name"]
    assert yaml.safe_load(config_map["data"][inventory["file"]])["all"]["hosts"]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert "secret" in volume_at(env["ANSIBLE_PRIVATE_KEY_FILE"])
    for flag in ("--json-file", "--prom"):
        claim = volume_at(args[args.index(flag) + 1])["persistentVolumeClaim"]["claimName"]
        assert claim == objects["PersistentVolumeClaim"]["metadata"]["name"]
    # The root filesystem is read-only, so HOME (Ansible's temp files, SSH control sockets) is a volume.
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert env["HOME"] in mounts


# --- collections/requirements.yml -------------------------------------------------------------------------


def shipped_collection_version(fqcn: str) -> str:
    """The version of a collection inside the pinned `ansible` package in this environment."""
    namespace, name = fqcn.split(".")
    spec = importlib.util.find_spec("ansible_collections")
    assert spec is not None and spec.submodule_search_locations
    for location in spec.submodule_search_locations:
        manifest = Path(location) / namespace / name / "MANIFEST.json"
        if manifest.is_file():
            return str(json.loads(manifest.read_text())["collection_info"]["version"])
    raise AssertionError(f"{fqcn} is not in the installed ansible package")


def requirements() -> dict[str, dict]:
    return {entry["name"]: entry for entry in yaml.safe_load(REQUIREMENTS.read_text())["collections"]}


# What the roles and playbooks call by FQCN, captured as "namespace.collection". Module keys, include_role
# names and action: values only count in task files (defaults may hold sysctl keys such as
# net.core.optmem_max); lookups, filters and tests count in any YAML or Jinja template of the content.
FQCN = r"([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+"
TASK_CALLS = (
    re.compile(rf"^\s*-?\s*{FQCN}:", re.MULTILINE),  # community.general.modprobe:
    re.compile(rf"^\s*-?\s*(?:name|role):\s*['\"]?{FQCN}['\"]?\s*$", re.MULTILINE),  # include_role name
    re.compile(rf"^\s*-?\s*(?:action|local_action|module):\s*['\"]?{FQCN}\b", re.MULTILINE),
)
TEMPLATE_CALLS = (
    re.compile(rf"\b(?:lookup|query|q)\(\s*['\"]{FQCN}['\"]"),  # lookup('ns.coll.x', ...)
    re.compile(rf"(?:\|\s*|\bis\s+(?:not\s+)?){FQCN}\b"),  # | ns.coll.filter, is ns.coll.test
)


def collections_called() -> dict[str, list[str]]:
    """Every collection the roles and playbooks call at run time -> where ("path:line"), molecule/ and tests aside."""
    task_files = {*REPO.glob("roles/*/tasks/**/*.yml"), *REPO.glob("roles/*/handlers/**/*.yml")}
    task_files |= set(REPO.glob("playbooks/*.yml"))
    content = {*REPO.glob("roles/**/*.yml"), *REPO.glob("roles/**/*.j2"), *task_files}
    called: dict[str, list[str]] = {}
    for path in sorted(content):
        text = path.read_text()
        for pattern in (*TEMPLATE_CALLS, *(TASK_CALLS if path in task_files else ())):
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                called.setdefault(match.group(1), []).append(f"{path.relative_to(REPO)}:{line}")
    return called


def test_galaxy_dependencies_cover_every_collection_the_content_calls():
    # An installed tarball (ansible-galaxy collection install) or EE brings exactly galaxy.yml's dependencies:
    # a call to any other collection fails on the host with "couldn't resolve module/action".
    called = collections_called()
    assert {"ansible.builtin", "gpufabric.cluster", "community.general", "ansible.posix"} <= called.keys()
    declared = yaml.safe_load((REPO / "galaxy.yml").read_text())["dependencies"].keys()
    undeclared = {
        fqcn: places[:3]
        for fqcn, places in called.items()
        if fqcn not in {"ansible.builtin", "gpufabric.cluster", *declared}
    }
    assert undeclared == {}, "called but not in galaxy.yml's dependencies"
    # And nothing declared that nothing calls: the content, or the CLI (bake's containers.podman.podman
    # connection, a string in driver/gpufabric).
    driver = "\n".join(path.read_text() for path in (REPO / "driver" / "gpufabric").glob("*.py"))
    cli = {fqcn for fqcn in declared if re.search(rf"[\"']{re.escape(fqcn)}\.[a-z0-9_]+[\"']", driver)}
    assert cli == {"containers.podman"}
    assert set(declared) <= called.keys() | cli
    assert set(declared) <= requirements().keys()


def test_requirements_pin_the_versions_of_the_pinned_ansible_package():
    for fqcn, entry in requirements().items():
        if fqcn == "gpufabric.cluster":
            continue
        assert entry["version"] == shipped_collection_version(fqcn), fqcn


def test_galaxy_dependencies_are_the_requirements_at_their_pins():
    # Installing the built collection brings the same collections, at least at the tested releases.
    dependencies = yaml.safe_load((REPO / "galaxy.yml").read_text())["dependencies"]
    pinned = {fqcn: entry["version"] for fqcn, entry in requirements().items() if fqcn != "gpufabric.cluster"}
    assert dependencies == {fqcn: f">={version}" for fqcn, version in pinned.items()}


def galaxy_install_self(cwd: Path, tmp_path: Path, ansible_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Install only requirements.yml's gpufabric.cluster entry the way ansible-galaxy reads it, from cwd.

    The other entries come from Galaxy, which is not reachable here; this one is the part that depends
    on where the command runs.
    """
    entry = requirements()["gpufabric.cluster"]
    only_self = tmp_path / "self-requirements.yml"
    only_self.write_text(yaml.safe_dump({"collections": [entry]}))
    target = tmp_path / "installed"
    env = {**ansible_env, "ANSIBLE_COLLECTIONS_PATH": str(target), "ANSIBLE_HOME": str(tmp_path / "ansible-home")}
    command = ["collection", "install", "--no-deps", "--force", "-r", str(only_self), "-p", str(target)]
    return subprocess.run(
        [str(BIN / "ansible-galaxy"), *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_awx_project_sync_installs_this_collection_from_the_checkout(tmp_path, ansible_env):
    # AWX runs ansible-galaxy in the project's root; so does a developer following the docs.
    assert requirements()["gpufabric.cluster"] == {"name": "gpufabric.cluster", "type": "dir", "source": "."}
    result = galaxy_install_self(REPO, tmp_path, ansible_env)
    assert result.returncode == 0, result.stdout + result.stderr
    installed = tmp_path / "installed" / "ansible_collections" / "gpufabric" / "cluster"
    assert (installed / "playbooks" / "site.yml").is_file()
    assert not (installed / "driver").exists()


# --- execution-environment.yml ----------------------------------------------------------------------------


def test_execution_environment_pins_match_constraints():
    definition = yaml.safe_load(EE.read_text())
    assert definition["version"] == 3
    assert definition["images"]["base_image"]["name"]
    deps = definition["dependencies"]
    pins = constraints()
    for key in ("ansible_core", "ansible_runner"):
        name, version = pip_pin(deps[key]["package_pip"])
        assert pins[name] == version, f"{key}: {name}=={version}; constraints.txt has {pins.get(name)}"
    python = dict(pip_pin(requirement) for requirement in deps["python"])
    # What the collection's plugins import (its requirements.txt), each at the tested version.
    plugin_needs = {
        re.split(r"[<>=!~ ]", line, maxsplit=1)[0].lower().replace("_", "-")
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert plugin_needs <= python.keys()
    for name, version in python.items():
        assert pins[name] == version, f"python: {name}=={version}; constraints.txt has {pins.get(name)}"
    assert (REPO / deps["galaxy"]) == REQUIREMENTS


def test_ansible_navigator_settings_run_site_yml_in_the_execution_environment():
    """ansible-navigator.yml: valid for ansible-navigator, and naming what execution-environment.yml builds."""
    import importlib.resources

    import jsonschema

    settings = yaml.safe_load(NAVIGATOR.read_text())
    # ansible-navigator's own settings schema (its data/ansible-navigator.json), as ansible-lint ships it to
    # check the file with its `schema` rule; ansible-navigator itself is not installed here.
    schema = importlib.resources.files("ansiblelint.schemas").joinpath("ansible-navigator-config.json")
    jsonschema.validate(settings, json.loads(schema.read_text()))
    navigator = settings["ansible-navigator"]
    assert (REPO / navigator["ansible"]["playbook"]["path"]) == REPO / "playbooks" / "site.yml"
    ee = navigator["execution-environment"]
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    # The tag docs/operations.md builds, as podman names a local image; never pulled (no registry has it).
    assert ee["enabled"] is True and ee["image"] == f"localhost/gpufabric-ee:{version}"
    assert ee["pull"]["policy"] == "never"
    assert f"ansible-builder build -f execution-environment.yml -t gpufabric-ee:{version}" in OPERATIONS.read_text()
    assert navigator["mode"] == "stdout"
    # The artifacts and the log land where git and the collection build ignore them, not in playbooks/.
    for path in (navigator["playbook-artifact"]["save-as"], navigator["logging"]["file"]):
        assert path.startswith("navigator-artifacts/"), path
    assert "navigator-artifacts/" in (REPO / ".gitignore").read_text().split()
    assert "navigator-artifacts" in yaml.safe_load((REPO / "galaxy.yml").read_text())["build_ignore"]


def test_ansible_builder_create_writes_a_context_that_installs_the_requirements(tmp_path, ansible_env):
    context = tmp_path / "context"
    result = subprocess.run(
        [str(BIN / "ansible-builder"), "create", "-f", str(EE), "-c", str(context)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**ansible_env, "HOME": str(tmp_path)},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    containerfile = (context / "Containerfile").read_text()
    build = context / "_build"
    assert (build / "requirements.yml").read_text() == REQUIREMENTS.read_text()
    assert re.search(r"ansible-galaxy collection install .*-r requirements\.yml", containerfile)
    assert "--user-pip=requirements.txt" in containerfile and "--user-bindep=bindep.txt" in containerfile
    assert "PyYAML==6.0.4" in (build / "requirements.txt").read_text().split()
    assert "openssh-clients" in (build / "bindep.txt").read_text()
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core==' in containerfile
    # The galaxy stage runs in /build, a copy of _build: the directory source "." must find the
    # collection there, as it does in the project root under AWX.
    assert "COPY _build /build\nWORKDIR /build" in containerfile
    installed = galaxy_install_self(build, tmp_path, ansible_env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    collection = tmp_path / "installed" / "ansible_collections" / "gpufabric" / "cluster"
    for path in ("roles/nccl_env/tasks/main.yml", "plugins/lookup/fabric_plan.py", "catalog/aws.yml"):
        assert (collection / path).is_file(), path
    # ansible-builder introspects the installed collection for its Python needs.
    meta = yaml.safe_load((collection / "meta" / "execution-environment.yml").read_text())
    assert (collection / meta["dependencies"]["python"]).is_file()
    # The cloud-SDK switch: the RUN line of the final stage, run here with pip replaced by echo.
    (run,) = [line for line in containerfile.splitlines() if "GPUFABRIC_CLOUDS" in line and line.startswith("RUN ")]
    sdks = tmp_path / "sdks"
    shutil.copytree(build / "cloud-sdks", sdks)
    script = run.removeprefix("RUN ").replace("/tmp/gpufabric-cloud-sdks", str(sdks))

    def switch(clouds: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "PYCMD": "echo", "GPUFABRIC_CLOUDS": clouds}
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=False)

    unknown = switch("aws azurre")
    assert unknown.returncode == 1 and "unknown cloud azurre; accepted: aws gcp azure nebius oci" in unknown.stdout
    chosen = switch("aws gcp")
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.split("\n")[:2] == [
        f"-m pip install --no-cache-dir -r {sdks}/{cloud}.txt" for cloud in ("aws", "gcp")
    ]
    assert not sdks.exists(), "the requirement files do not stay in the image"


def test_the_ee_cloud_sdks_are_the_extras_at_their_pins():
    pins = constraints()
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for path in sorted((REPO / "ee" / "cloud-sdks").glob("*.txt")):
        lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
        sdk = dict(pip_pin(line) for line in lines)
        assert {name: pins[name] for name in sdk} == sdk, path.name
        assert sdk.keys() == {re.split(r"[<>=!~ ]", line, maxsplit=1)[0] for line in extras[path.stem]}, path.name
    assert {path.stem for path in (REPO / "ee" / "cloud-sdks").glob("*.txt")} == {
        "aws",
        "gcp",
        "azure",
        "nebius",
        "oci",
    }


# --- Packer -----------------------------------------------------------------------------------------------


def hcl_block(text: str, header: str) -> str:
    """The body of the first block whose header matches (braces counted; HCL strings here hold none unbalanced)."""
    match = re.search(header + r"\s*\{", text, re.MULTILINE)
    assert match, f"no block {header!r}"
    depth, start = 1, match.end()
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start:index]
    raise AssertionError(f"block {header!r} is not closed")


def test_packer_template_runs_bake_yml_with_the_ansible_provisioner():
    text = PACKER.read_text()
    assert text.count("{") == text.count("}")
    build = hcl_block(text, r"^build")
    provisioner = hcl_block(build, r'provisioner\s+"ansible"')
    playbook = re.search(r'playbook_file\s*=\s*"\$\{path\.root\}/([^"]+)"', provisioner)
    assert playbook, "playbook_file must be relative to the template (path.root)"
    assert (PACKER.parent / playbook.group(1)).resolve() == REPO / "playbooks" / "bake.yml"
    assert (REPO / "playbooks" / "bake.yml").is_file()
    extra_vars = r"jsonencode\(\{\s*gpufabric_profile\s*=\s*var\.gpufabric_profile,\s*gpufabric_bake\s*=\s*true"
    assert re.search(extra_vars, provisioner)
    # The provisioner's own collection install, from the file AWX and ansible-builder read, into the
    # path ansible-playbook is given; relative to the repository root, where requirements.yml's
    # directory source resolves.
    assert re.search(r'^\s*galaxy_file\s*=\s*"collections/requirements\.yml"$', provisioner, re.MULTILINE)
    assert re.search(r"^\s*collections_path\s*=\s*var\.collections_path$", provisioner, re.MULTILINE)
    assert re.search(r"^\s*galaxy_force_install\s*=\s*true$", provisioner, re.MULTILINE)
    assert "ANSIBLE_COLLECTIONS_PATH=${var.collections_path}" in provisioner
    # The venv's ansible-playbook and ansible-galaxy, not whatever PATH holds (if anything).
    assert re.search(r'^\s*command\s*=\s*"\$\{var\.ansible_bin\}/ansible-playbook"$', provisioner, re.MULTILINE)
    assert re.search(r'^\s*galaxy_command\s*=\s*"\$\{var\.ansible_bin\}/ansible-galaxy"$', provisioner, re.MULTILINE)
    ansible_bin = hcl_block(text, r'^variable\s+"ansible_bin"')
    assert re.search(r'^\s*default\s*=\s*"\.venv/bin"$', ansible_bin, re.MULTILINE)
    assert 'venv="${repo}/.venv"' in (REPO / "scripts" / "bootstrap-venv").read_text()
    # Every variable used is declared.
    declared = set(re.findall(r'^variable\s+"([a-z_]+)"', text, re.MULTILINE))
    assert set(re.findall(r"\bvar\.([a-z_]+)", text)) <= declared
    sources = re.findall(r'^source\s+"([a-z0-9-]+)"\s+"([a-z0-9_-]+)"', text, re.MULTILINE)
    assert [f"source.{kind}.{name}" for kind, name in sources] == re.findall(r'"(source\.[^"]+)"', build)


def hcl_string(value: object) -> object:
    """python-hcl2 keeps a string literal's quotes: the value Packer reads."""
    return value[1:-1] if isinstance(value, str) and value.startswith('"') and value.endswith('"') else value


def test_packer_directory_form_parses_with_required_plugins():
    # The form of Packer 1.7 and later (`packer init examples/packer`): every file of the directory is
    # read, versions.pkr.hcl's block included. Packer 1.6.6, the newest packer Debian has, refuses that
    # block; python-hcl2 (PyPI, pinned in constraints.txt) parses HCL2 as the newer Packers do.
    import hcl2

    files = sorted(PACKER.parent.glob("*.pkr.hcl"))
    assert files == sorted([PACKER, PACKER_VERSIONS])
    parsed = {path.name: hcl2.loads(path.read_text()) for path in files}
    blocks = [block for body in parsed.values() for block in body.get("packer", [])]
    assert len(blocks) == 1 and "packer" in parsed[PACKER_VERSIONS.name], "one packer block, in versions.pkr.hcl"
    # Packer 1.6.6 cannot parse this block: the template it is given alone must not hold one.
    assert "packer" not in parsed[PACKER.name]
    assert hcl_string(blocks[0]["required_version"]) == ">= 1.7.0"
    [plugins] = blocks[0]["required_plugins"]
    wanted = {"amazon": "github.com/hashicorp/amazon", "ansible": "github.com/hashicorp/ansible"}
    assert {name: hcl_string(plugins[name]["source"]) for name in wanted} == wanted
    for name in wanted:
        assert re.fullmatch(r">= \d+\.\d+\.\d+", str(hcl_string(plugins[name]["version"])))
    # The directory's builder and provisioner are the ones the plugins provide.
    [source] = parsed[PACKER.name]["source"]
    assert list(source) == ['"amazon-ebs"']
    [build] = parsed[PACKER.name]["build"]
    assert [list(provisioner) for provisioner in build["provisioner"]] == [['"ansible"']]


def test_python_hcl2_refuses_what_packer_would():
    # The parse above proves something only if a broken file fails it.
    import hcl2
    from lark.exceptions import UnexpectedInput

    broken = PACKER_VERSIONS.read_text().rstrip().removesuffix("}")
    with pytest.raises(UnexpectedInput):
        hcl2.loads(broken)


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is not installed on this machine")
def test_packer_validates_the_template(tmp_path):
    # Debian 12's Packer 1.6.6 (scripts/test installs it): it predates versions.pkr.hcl's block, so it
    # is given the template alone; its built-in amazon-ebs builder and ansible provisioner check every
    # setting, the files named and `ansible-playbook --version`. No AWS call is made. PATH holds packer
    # and nothing else: the template finds ansible-playbook in the venv (var.ansible_bin) itself.
    only_packer = tmp_path / "bin"
    only_packer.mkdir()
    (only_packer / "packer").symlink_to(shutil.which("packer"))

    def packer(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PATH": str(only_packer), "CHECKPOINT_DISABLE": "1"}
        return subprocess.run(
            ["packer", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    def said(result: subprocess.CompletedProcess[str]) -> str:
        return " ".join((result.stdout + result.stderr).split())  # packer wraps its messages

    fmt = packer("fmt", "-check", "-diff", str(PACKER.parent), cwd=REPO)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    variables = ["-var", "gpufabric_profile=aws/p5.48xlarge", "-var", "vars_file=bake-vars.yml"]
    # The default, .venv/bin, where scripts/bootstrap-venv puts it; a venv elsewhere is named.
    if BIN != REPO / ".venv" / "bin":
        variables += ["-var", f"ansible_bin={BIN}"]
    valid = packer("validate", *variables, str(PACKER), cwd=REPO)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    # The provisioner runs the ansible-playbook of var.ansible_bin, and no other.
    elsewhere_bin = packer("validate", *variables, "-var", f"ansible_bin={tmp_path}", str(PACKER), cwd=REPO)
    assert elsewhere_bin.returncode != 0 and f"{tmp_path}/ansible-playbook --version" in said(elsewhere_bin)
    # Anywhere but the repository root the collections cannot be installed, and validate says so.
    absolute = [*variables, "-var", f"ansible_bin={BIN}"]
    elsewhere = packer("validate", *absolute, str(PACKER), cwd=REPO / "docs")
    assert elsewhere.returncode != 0 and "galaxy_file: collections/requirements.yml" in said(elsewhere)
    # Packer 1.6.6 refuses the directory form (versions.pkr.hcl's block), as the docs say.
    directory = packer("validate", *variables, str(PACKER.parent), cwd=REPO)
    assert directory.returncode != 0 and 'Blocks of type "required_plugins" are not expected' in said(directory)


# --- docs -------------------------------------------------------------------------------------------------


def test_operations_doc_names_files_that_exist():
    text = OPERATIONS.read_text()
    file_name = r"`((?:examples|collections|playbooks)/[^`\s]+|(?:execution-environment|ansible-navigator)\.yml)`"
    named = set(re.findall(file_name, text))
    for path in (SERVICE, TIMER, CRONJOB, EE, NAVIGATOR, REQUIREMENTS, PACKER, PACKER_VERSIONS):
        assert str(path.relative_to(REPO)) in named, f"docs/operations.md does not name {path.relative_to(REPO)}"
    missing = sorted(path for path in named if not (REPO / path).exists())
    assert missing == []


def test_example_yaml_passes_yamllint_strict():
    files = [CRONJOB, EE, NAVIGATOR, REQUIREMENTS]
    result = subprocess.run(
        [str(BIN / "yamllint"), "--strict", *map(str, files)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
