"""MPIJob manifests checked as the cluster would: the mpi-operator's v2beta1 schema (jsonschema, unknown fields
refused) and every pod template against Kubernetes' core/v1 schema (kubernetes-validate)."""
from __future__ import annotations

import copy

import jsonschema
import kubernetes_validate
import yaml

from tests.lib.paths import REPO

SCHEMA = REPO / "tests" / "data" / "mpi-operator" / "mpijob-v2beta1.schema.yaml"
#: CleanPodPolicy values in mpi-operator's pkg/apis/kubeflow/v2beta1/types.go (the CRD only says "string").
CLEAN_POD_POLICIES = ("All", "Running", "None")
KUBERNETES_VERSION = "1.29"


def _strict(schema):
    """Reject unknown fields: the API server would silently prune them from a structural schema, so a typo such
    as `launcherCreationPolicies` would vanish without an error. (Objects with `additionalProperties` are maps.)"""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(schema)
    return schema


def validate_mpijob(obj: dict) -> None:
    """Raise ``jsonschema.ValidationError`` / ``kubernetes_validate.ValidationError`` (or AssertionError) unless
    ``obj`` is an MPIJob the operator and the API server accept as it is."""
    jsonschema.validate(obj, _strict(yaml.safe_load(SCHEMA.read_text())))
    assert obj["spec"]["runPolicy"]["cleanPodPolicy"] in CLEAN_POD_POLICIES
    for role, replica in obj["spec"]["mpiReplicaSpecs"].items():
        pod_template = {"apiVersion": "v1", "kind": "PodTemplate",
                        "metadata": {"name": "%s-%s" % (obj["metadata"]["name"], role.lower())},
                        "template": replica["template"]}
        kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)
