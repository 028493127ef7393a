# SPDX-License-Identifier: Apache-2.0
"""Who may use the fabric's RDMA functions: the admission policy `gpufabric k8s manifests` writes.

The device plugin hands any pod that requests ``<prefix>/rdma_vf_*`` a virtual function of the high-speed fabric,
in any namespace. The policy refuses a pod that requests one of the fleet's SR-IOV resources, or any resource of
the RDMA shared device plugin's default prefix ``rdma/`` (Mellanox/k8s-rdma-shared-dev-plugin README,
"resourcePrefix"), unless its namespace carries the label ``gpufabric.io/fabric-access=true``:

- a ValidatingAdmissionPolicy and its binding (admissionregistration.k8s.io/v1, GA in Kubernetes 1.30): the
  binding's namespaceSelector picks the namespaces without the label (``NotIn`` also selects a namespace that
  lacks the key), and the policy's CEL expression refuses a pod whose containers or init containers request or
  limit such a resource;
- with ``--gatekeeper``, the same rule as an OPA Gatekeeper ConstraintTemplate (Rego v1, Gatekeeper 3.19 or
  later) and its Constraint, for clusters that admit through Gatekeeper.

The label is the grant: whoever may label namespaces may give them the fabric, so keep ``patch`` on namespaces
for cluster administrators (docs/kubernetes.md).
"""

from __future__ import annotations

import json
from typing import Any

ACCESS_LABEL = "gpufabric.io/fabric-access"
ACCESS_VALUE = "true"
# The RDMA shared device plugin's default resource prefix (its README, "resourcePrefix").
RDMA_SHARED_PREFIX = "rdma/"
POLICY_NAME = "gpufabric-fabric-resources"
GATEKEEPER_KIND = "GpufabricFabricResources"

# Every container that can hold a resource request: ephemeral containers may not set resources (Pod API).
_CONTAINERS = "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"
_FABRIC = f"(r in variables.fabricResources || r.startsWith('{RDMA_SHARED_PREFIX}'))"
# True when the pod requests or limits none of the fabric's resources.
ALLOWED_EXPRESSION = (
    f"!({_CONTAINERS}).exists(c, has(c.resources) && ("
    f"(has(c.resources.requests) && c.resources.requests.exists(r, {_FABRIC})) || "
    f"(has(c.resources.limits) && c.resources.limits.exists(r, {_FABRIC}))))"
)
MESSAGE = (
    f"pods may request the fabric's RDMA resources only in namespaces labelled {ACCESS_LABEL}={ACCESS_VALUE} "
    "(gpufabric k8s manifests, admission policy)"
)

# The same rule in Rego v1 for Gatekeeper (``code`` with ``source.version: v1``, Gatekeeper 3.19 or later, whose docs
# "Enable OPA Rego v1 syntax in ConstraintTemplates" describe it; open-policy-agent/gatekeeper #3907: no
# ``import rego.v1`` there): one violation per container and resource, naming both.
REGO = f"""package gpufabricfabricresources

fabric_resource(name) if {{
  name in input.parameters.resources
}}

fabric_resource(name) if {{
  startswith(name, "{RDMA_SHARED_PREFIX}")
}}

containers contains c if {{
  some c in input.review.object.spec.containers
}}

containers contains c if {{
  some c in input.review.object.spec.initContainers
}}

violation contains {{"msg": msg}} if {{
  some c in containers
  some section in ["requests", "limits"]
  some name, _ in c.resources[section]
  fabric_resource(name)
  msg := sprintf("container %v requests %v: {MESSAGE}", [c.name, name])
}}
"""


def _namespace_selector() -> dict[str, Any]:
    return {"matchExpressions": [{"key": ACCESS_LABEL, "operator": "NotIn", "values": [ACCESS_VALUE]}]}


def admission_policy(resources: list[str]) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding for the fleet's SR-IOV resource names."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "variables": [{"name": "fabricResources", "expression": json.dumps(sorted(resources))}],
            "validations": [{"expression": ALLOWED_EXPRESSION, "message": MESSAGE, "reason": "Forbidden"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": _namespace_selector()},
        },
    }
    return [policy, binding]


def gatekeeper_template() -> dict[str, Any]:
    """The Gatekeeper ConstraintTemplate: its CRD takes the resource names as parameters."""
    return {
        "apiVersion": "templates.gatekeeper.sh/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": GATEKEEPER_KIND.lower()},
        "spec": {
            "crd": {
                "spec": {
                    "names": {"kind": GATEKEEPER_KIND},
                    "validation": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"resources": {"type": "array", "items": {"type": "string"}}},
                        }
                    },
                }
            },
            "targets": [
                {
                    "target": "admission.k8s.gatekeeper.sh",
                    "code": [{"engine": "Rego", "source": {"version": "v1", "rego": REGO}}],
                }
            ],
        },
    }


def gatekeeper_constraint(resources: list[str]) -> dict[str, Any]:
    """The Constraint: Pods in namespaces without the label, with the fleet's resource names."""
    return {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": GATEKEEPER_KIND,
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "enforcementAction": "deny",
            "match": {
                "kinds": [{"apiGroups": [""], "kinds": ["Pod"]}],
                "namespaceSelector": _namespace_selector(),
            },
            "parameters": {"resources": sorted(resources)},
        },
    }
