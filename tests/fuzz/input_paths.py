# SPDX-License-Identifier: Apache-2.0
"""Every input path of the `gpufabric` command line, in one table: each option of each command, and each
environment variable the driver reads, with the kind of value it takes.

The kind decides which bad values the generated suite (test_fuzz_inputs.py) tries on the path, so a new option
is fuzzed the day it is added: test_fuzz_inputs.py fails for an option that is in no row here. Kinds:

- ``file``: a file gpufabric reads (missing, a directory, a FIFO, not UTF-8, a symbolic link loop);
- ``path``: a file gpufabric hands on to Ansible (as ``file``, but any bytes: a key, a password, a script);
- ``directory``: a directory gpufabric reads (missing, a file, a FIFO);
- ``inventory``: what ``-i`` takes: a file, a directory of them, or a host list (as ``file``, a directory aside);
- ``count``: a whole number in a range (text, negative, a superscript digit, an exponent, 20 digits);
- ``choice``: one of a fixed set (unknown, empty, an escape sequence);
- ``cidr``: an IPv4 range (not an address, a prefix over 32, an octet over 255);
- ``output``: a file or directory gpufabric writes, fuzzed by test_fuzz_outputs.py's targets;
- ``pass``: handed to Ansible, the cloud SDK or podman as given, which answers for it (the reason is in the row);
- ``flag``: takes no value.
"""

from __future__ import annotations

INV = ("-i", "localhost,")
PROFILE = "aws/p5.48xlarge"

# What each command needs besides the option under test, so that the option's value is what gets refused.
BASE: dict[str, tuple[str, ...]] = {
    "plan": INV,
    "verify": INV,
    "apply": INV,
    "drift": INV,
    "health": INV,
    "demo": (),
    "bake": ("--profile", PROFILE, "--tag", "localhost/fuzz:1"),
    "catalog list": (),
    "catalog show": (PROFILE,),
    "inventory build": ("--source", "static", "--file", "{tmp}/fleet.yml"),
    "k8s manifests": (*INV, "-o", "{tmp}/manifests"),
    "nccl parse": (),
    "lab up": (),
    "lab down": (),
    "lab status": (),
}

ANSIBLE = "handed to ansible-playbook as given (its own parsing answers for it)"
SDK = "a cloud SDK's name for a place; the cloud's answer is fuzzed by tests/discovery's fake servers"

# (command, option) -> kind, or ("pass", why). Positional arguments are named by their parameter name.
OPTIONS: dict[tuple[str, str], str | tuple[str, str]] = {
    **{(command, "-i"): "inventory" for command in ("plan", "verify", "apply", "drift", "health", "k8s manifests")},
    **{
        (command, "--catalog"): "file"
        for command in (
            "plan",
            "verify",
            "apply",
            "drift",
            "health",
            "bake",
            "catalog list",
            "catalog show",
            "inventory build",
            "k8s manifests",
        )
    },
    **{(command, "--tier"): "choice" for command in ("plan", "verify", "apply", "drift", "bake", "k8s manifests")},
    **{(command, "--settings"): "choice" for command in ("apply", "drift")},
    **{(command, "--become-password-file"): "path" for command in ("verify", "apply", "drift")},
    **{(command, "--vault-password-file"): "path" for command in ("verify", "apply", "drift", "bake")},
    **{(command, "--private-key"): "path" for command in ("verify", "apply", "drift", "health")},
    **{
        (command, "-e"): ("pass", ANSIBLE + "; -e @FILE: test_fuzz_catalog.py")
        for command in ("verify", "apply", "drift", "bake")
    },
    **{(command, "-u"): ("pass", ANSIBLE) for command in ("verify", "apply", "drift", "health")},
    **{(command, "--vault-id"): ("pass", ANSIBLE) for command in ("verify", "apply", "drift", "bake")},
    **{(command, "-v"): "flag" for command in ("verify", "apply", "drift", "health", "bake")},
    **{(command, "--limit"): ("pass", ANSIBLE) for command in ("verify", "apply", "drift", "health")},
    **{(command, "-t"): ("pass", ANSIBLE) for command in ("apply", "drift")},
    **{(command, "--skip-tags"): ("pass", ANSIBLE) for command in ("apply", "drift")},
    **{(command, "--artifacts"): "output" for command in ("apply", "drift", "health", "bake")},
    ("verify", "--collective"): "choice",
    ("verify", "--nodes"): "count",
    ("verify", "--compare"): "choice",
    ("verify", "--nvlink"): "choice",
    ("verify", "-o"): "output",
    ("verify", "--from-results"): "directory",
    ("verify", "--title"): ("pass", "a report title, printed through the report's escaping"),
    ("apply", "--serial"): ("pass", "fuzzed value by value in test_fuzz_cli_basics.py"),
    ("apply", "--max-fail"): ("pass", "fuzzed value by value in test_fuzz_cli_basics.py"),
    ("drift", "--json-file"): "output",
    ("drift", "--junit"): "output",
    ("drift", "--prom"): "output",
    ("health", "--quarantine"): "output",
    ("health", "--junit"): "output",
    ("health", "--previous"): "file",
    ("demo", "--profile"): "choice",
    ("demo", "--nodes"): "count",
    ("demo", "--name"): ("pass", "a lab name, checked as lab up --name is"),
    ("demo", "--dir"): "output",
    ("demo", "-o"): "output",
    ("bake", "--profile"): "choice",
    ("bake", "--tag"): ("pass", "an image reference for podman commit, checked by podman"),
    ("bake", "--image"): ("pass", "a base image reference, pulled by podman"),
    ("catalog show", "name"): "choice",
    ("inventory build", "--source"): "choice",
    ("inventory build", "--format"): "choice",
    ("inventory build", "--file"): "file",
    ("inventory build", "-o"): "output",
    **{
        ("inventory build", option): ("pass", SDK)
        for option in (
            "--region",
            "--project",
            "--zone",
            "--subscription",
            "--resource-group",
            "--compartment",
            "--parent-id",
            "--profile",
            "--endpoint-url",
        )
    },
    ("k8s manifests", "-o"): "output",
    ("k8s manifests", "--resource-prefix"): ("pass", "a Kubernetes name, checked against RFC 1123 by the command"),
    ("k8s manifests", "--namespace"): ("pass", "a Kubernetes name, checked against RFC 1123 by the command"),
    ("k8s manifests", "--storage-interface"): ("pass", "an interface name, checked by the command (15 bytes)"),
    ("k8s manifests", "--ipam-range"): "cidr",
    ("k8s manifests", "--storage-ipam-range"): "cidr",
    ("nccl parse", "file"): "file",
    ("lab up", "--profile"): "choice",
    ("lab up", "--nodes"): "count",
    ("lab up", "--name"): ("pass", "a lab name: container names are checked by the command"),
    ("lab up", "--image"): ("pass", "an image reference, pulled by podman"),
    **{(command, "--dir"): "output" for command in ("lab up", "lab down", "lab status")},
    **{(command, "--name"): ("pass", "a lab name, looked up in --dir") for command in ("lab down", "lab status")},
}

# Environment variables the driver reads itself (ANSIBLE_* are Ansible's: tests/unit/test_ansible_config.py).
ENVIRONMENT: dict[str, str | tuple[str, str]] = {
    "GPUFABRIC_CATALOG": "file",
    **{
        variable: (
            "pass",
            "read by inventory build only; fuzzed value by value in tests/discovery/test_bad_endpoints.py",
        )
        for variable in ("GPUFABRIC_CLOUD_RETRIES", "GPUFABRIC_CLOUD_TIMEOUT")
    },
    "GPUFABRIC_INVENTORY_TIMEOUT": ("pass", "fuzzed value by value in tests/unit/test_inventory_timeout.py"),
    "GPUFABRIC_KEEP_RUNS": ("pass", "fuzzed value by value in tests/unit/test_runs.py"),
    "GPUFABRIC_SECRET_VARS": ("pass", "a list of variable names to redact; any text is a name"),
}
