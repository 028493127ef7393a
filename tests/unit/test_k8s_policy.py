# SPDX-License-Identifier: Apache-2.0
"""The admission policy of `gpufabric k8s manifests`: valid Kubernetes objects, and a rule that admits a pod
requesting the fabric's resources only in a labelled namespace.

Nothing here has an API server: the objects are checked against Kubernetes' published OpenAPI schemas
(kubernetes-validate), the policy's CEL expression is evaluated by cel-python with the variables the API server
binds (``object``, ``variables``), the binding's namespaceSelector by the label-selector rules of
apimachinery's ``labels.Selector`` (NotIn selects a namespace without the key), and the Gatekeeper Rego by rego-cpp
(regopy) with Gatekeeper's input shape (``input.review.object``, ``input.parameters``).
"""

from __future__ import annotations

import json
from typing import Any

import celpy
import kubernetes_validate
import pytest
import yaml
from regopy import Interpreter

from gpufabric import k8s, k8s_policy

RESOURCES = ["nvidia.com/rdma_vf_hgx_h100", "nvidia.com/rdma_vf_hgx_h100_roce"]
GRANTED = {k8s_policy.ACCESS_LABEL: k8s_policy.ACCESS_VALUE}
# The oldest Kubernetes with ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1, and the newest schemas.
KUBERNETES_VERSIONS = ["1.30.0", "1.37.0"]


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def container(name: str = "c", requests: dict | None = None, limits: dict | None = None) -> dict[str, Any]:
    resources = {key: value for key, value in (("requests", requests), ("limits", limits)) if value is not None}
    return {"name": name, "image": "x", **({"resources": resources} if resources else {})}


# (pod, requests a fabric resource)
PODS = [
    (pod([container()]), False),
    (pod([container(requests={"cpu": "1"}, limits={"nvidia.com/gpu": "8"})]), False),
    (pod([container(limits={RESOURCES[0]: "1"})]), True),
    (pod([container(requests={RESOURCES[1]: "1"})]), True),
    (pod([container()], init=[container("init", requests={RESOURCES[0]: "1"})]), True),
    # The RDMA shared device plugin's resources, whatever their name.
    (pod([container(limits={"rdma/hca_shared_devices_a": "1"})]), True),
    (pod([container(), container("second", limits={"memory": "1Gi", RESOURCES[0]: "2"})]), True),
    # Another prefix's resource of the same name is not the fleet's.
    (pod([container(limits={"example.com/rdma_vf_hgx_h100": "1"})]), False),
]


def cel_allows(expression: str, variables: dict[str, str], admitted: dict[str, Any]) -> bool:
    """The API server's evaluation: the policy's variables first (each a CEL expression), then the validation."""
    env = celpy.Environment()
    activation: dict[str, Any] = {"object": celpy.json_to_cel(admitted)}
    bound = {name: env.program(env.compile(text)).evaluate(activation) for name, text in variables.items()}
    activation["variables"] = celpy.json_to_cel({name: json.loads(json.dumps(value)) for name, value in bound.items()})
    result = env.program(env.compile(expression)).evaluate(activation)
    assert isinstance(result, celpy.celtypes.BoolType), result
    return bool(result)


def selected(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """apimachinery label-selector semantics for the operators the binding uses."""
    for requirement in selector.get("matchExpressions", []):
        key, operator, values = requirement["key"], requirement["operator"], requirement.get("values", [])
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def policy_objects(resources: list[str] = RESOURCES) -> tuple[dict[str, Any], dict[str, Any]]:
    policy, binding = k8s_policy.admission_policy(resources)
    return policy, binding


def admitted_by_policy(admitted: dict[str, Any], namespace_labels: dict[str, str]) -> bool:
    policy, binding = policy_objects()
    if not selected(binding["spec"]["matchResources"]["namespaceSelector"], namespace_labels):
        return True
    variables = {variable["name"]: variable["expression"] for variable in policy["spec"]["variables"]}
    return all(cel_allows(check["expression"], variables, admitted) for check in policy["spec"]["validations"])


def gatekeeper_violations(admitted: dict[str, Any], resources: list[str] = RESOURCES) -> list[str]:
    template = k8s_policy.gatekeeper_template()
    [code] = template["spec"]["targets"][0]["code"]
    assert code["source"]["version"] == "v1"
    rego = Interpreter()
    rego.add_module("template", code["source"]["rego"])
    rego.set_input_term(json.dumps({"review": {"object": admitted}, "parameters": {"resources": resources}}))
    output = json.loads(str(rego.query("x = data.gpufabricfabricresources.violation")))
    return [violation["msg"] for violation in output["bindings"]["x"]]


@pytest.mark.parametrize(("admitted", "fabric"), PODS)
def test_the_policy_refuses_a_fabric_pod_outside_labelled_namespaces_and_admits_it_inside(admitted, fabric):
    assert admitted_by_policy(admitted, {}) is not fabric
    assert admitted_by_policy(admitted, {"team": "ml"}) is not fabric
    assert admitted_by_policy(admitted, {k8s_policy.ACCESS_LABEL: "false"}) is not fabric
    assert admitted_by_policy(admitted, {**GRANTED, "team": "ml"}) is True


@pytest.mark.parametrize(("admitted", "fabric"), PODS)
def test_the_gatekeeper_rule_finds_the_same_pods(admitted, fabric):
    violations = gatekeeper_violations(admitted)
    assert bool(violations) is fabric
    assert all(k8s_policy.ACCESS_LABEL in message for message in violations)
    # The Constraint's namespaceSelector is the binding's: a labelled namespace is never reviewed.
    constraint = k8s_policy.gatekeeper_constraint(RESOURCES)
    assert not selected(constraint["spec"]["match"]["namespaceSelector"], GRANTED)
    assert constraint["spec"]["parameters"]["resources"] == RESOURCES


def test_a_violation_names_the_container_and_the_resource():
    [message] = gatekeeper_violations(pod([container("trainer", limits={RESOURCES[0]: "1"})]))
    assert message.startswith(f"container trainer requests {RESOURCES[0]}:")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_policy_and_binding_are_valid_kubernetes_objects(version):
    for document in policy_objects():
        kubernetes_validate.validate(document, version, strict=True)
    for admitted, _fabric in PODS:
        kubernetes_validate.validate(admitted, version, strict=True)


def test_the_manifests_carry_the_policy_for_the_fleets_resources():
    networks = [
        k8s.ProfileNetwork(
            profile="baremetal/x",
            slug="x",
            instance_type="x",
            link_type="infiniband",
            hosts=["n0"],
            nics=1,
            vfs_per_nic=1,
            devices=["101e"],
            gpus=8,
            rails=[k8s.Rail("rdma_vf_x", "rdma-x", None, "192.168.0.0/17")],
        )
    ]
    plain = k8s.manifests(networks, k8s.Options(), "inv")
    assert "31-gatekeeper-template.yaml" not in plain
    policy, binding = [document for document in yaml.safe_load_all(plain["30-admission-policy.yaml"]) if document]
    assert json.loads(policy["spec"]["variables"][0]["expression"]) == ["nvidia.com/rdma_vf_x"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert f"kubectl label namespace default {k8s_policy.ACCESS_LABEL}=true" in plain["README.md"]
    gatekeeper = k8s.manifests(networks, k8s.Options(gatekeeper=True), "inv")
    [template] = [doc for doc in yaml.safe_load_all(gatekeeper["31-gatekeeper-template.yaml"]) if doc]
    [constraint] = [doc for doc in yaml.safe_load_all(gatekeeper["32-gatekeeper-constraint.yaml"]) if doc]
    assert constraint["kind"] == template["spec"]["crd"]["spec"]["names"]["kind"]
    # Gatekeeper names the CRD after the template, which must be the kind in lower case.
    assert template["metadata"]["name"] == constraint["kind"].lower()
    assert constraint["spec"]["parameters"]["resources"] == ["nvidia.com/rdma_vf_x"]
