"""KServe: a ServingRuntime (``serving.kserve.io/v1alpha1``) running ``vllm serve`` from the
image by digest, and an InferenceService (``serving.kserve.io/v1beta1``) using it.

KServe's storage initializer puts the model at ``/mnt/models`` (``storageUri``: ``hf://``
for a Hub repo, ``pvc://CLAIM/FOLDER`` for local weights copied to a claim), so the runtime
serves ``/mnt/models`` under the model's own name (``--served-model-name``) on port 8080,
the port KServe's runtimes listen on. The InferenceService asks
``serving.kserve.io/deploymentMode: RawDeployment`` (a plain Deployment: the probes are
Kubernetes' own) and carries the GPU request and the node affinity of the GPU layer.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from envkit.deploy import affinity
from envkit.deploy.facts import Facts
from envkit.deploy.kubernetes import Secrets, env_list, probes, quantity, volumes

PORT = 8080
MOUNT = "/mnt/models"
FORMAT = "vllm"


def served_name(facts: Facts) -> str:
    return PurePosixPath(facts.served).name if facts.local_weights else facts.served


def runtime_args(facts: Facts) -> list[str]:
    return [MOUNT, "--served-model-name", served_name(facts), *facts.serve_args(PORT)]


def storage_uri(facts: Facts) -> str:
    if facts.local_weights:
        return f"pvc://{facts.name}-weights/{PurePosixPath(facts.served).name}"
    return f"hf://{facts.served}"


def _probes(facts: Facts, secrets: Secrets) -> dict[str, Any]:
    found = probes(facts, secrets)
    for probe in found.values():
        probe["httpGet"]["port"] = PORT
    return found


def serving_runtime(facts: Facts, secrets: Secrets) -> dict[str, Any]:
    assert facts.image is not None
    found, mounts = volumes(facts, "")
    shm = [v for v in found if v["name"] == "shm"]  # the model comes from storageUri
    mounts = [m for m in mounts if m["name"] == "shm"]
    container = {
        "name": "kserve-container",
        "image": facts.image.reference,
        "command": ["vllm", "serve"],
        "args": runtime_args(facts),
        "ports": [{"containerPort": PORT, "protocol": "TCP"}],
        "env": [e for e in env_list(facts, secrets) if e["name"] != "HF_TOKEN"],
        "volumeMounts": mounts,
        **_probes(facts, secrets),
    }
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": f"{facts.name}-runtime", "annotations": facts.annotations()},
        "spec": {
            "supportedModelFormats": [{"name": FORMAT, "autoSelect": False}],
            "containers": [container],
            "volumes": shm,
        },
    }


def inference_service(facts: Facts, secrets: Secrets) -> dict[str, Any]:
    gpus = {"nvidia.com/gpu": str(facts.gpus_per_node)} if facts.spec.cuda else {}
    model: dict[str, Any] = {
        "modelFormat": {"name": FORMAT},
        "runtime": f"{facts.name}-runtime",
        "storageUri": storage_uri(facts),
        "resources": {
            "requests": {**gpus, "memory": quantity(facts.weights_bytes + 8 * 1024**3)},
            "limits": dict(gpus),
        },
    }
    predictor: dict[str, Any] = {"minReplicas": facts.replicas, "model": model}
    placed = affinity.affinity(
        facts.spec.capabilities if facts.spec.kernels_known else None,
        facts.spec.driver,
        facts.gpu_memory,
    )
    if placed:
        predictor["affinity"] = placed
    annotations = {**facts.annotations(), "serving.kserve.io/deploymentMode": "RawDeployment"}
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": facts.name, "annotations": annotations},
        "spec": {"predictor": predictor},
    }


def objects(facts: Facts, secrets: Secrets) -> list[dict[str, Any]]:
    return [serving_runtime(facts, secrets), inference_service(facts, secrets)]
