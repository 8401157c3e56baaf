"""Plain Kubernetes: a Deployment (a LeaderWorkerSet when the plan spans nodes) and a Service.

The pod runs the image by digest with ``vllm serve MODEL`` and the plan's flags; requests the
GPUs; mounts ``/dev/shm`` as a memory-backed ``emptyDir`` (vLLM's processes and NCCL share
tensors through it); probes ``/health`` while the model loads (a startup probe whose budget is
the load's estimate), then ``/v1/models`` for readiness and ``/health`` for liveness; says
``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` when the weights are local (a volume at
``/models``); takes a Hub token and an API key from Secrets (references, never values); and
lands only on nodes whose GPU, driver and memory fit (:mod:`envkit.deploy.affinity`).

A LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) groups ``nodes`` pods: the leader starts
Ray's head, waits for the group's nodes and starts ``vllm serve`` with the pipeline across
the group; each worker joins the leader's Ray (``LWS_LEADER_ADDRESS``, which LeaderWorkerSet
sets in every pod).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from envkit.deploy import affinity
from envkit.deploy.facts import ANNOTATION, GIB, PORT, Facts, dns_name, ray_wait
from envkit.io.escaping import shell_command

KUBERNETES_VERSION = "1.33"  # the schemas the objects are tested against (kubernetes-validate)
RAY_PORT = 6379
WEIGHTS = "/models"
LWS_API = "leaderworkerset.x-k8s.io/v1"


@dataclass(frozen=True)
class Secrets:
    """The Secrets the pods read variables from (names; the values stay in the cluster)."""

    hf_token: str = "hf-token"  # key "token"; optional: a public model needs none
    api_key: str = ""  # key "api-key"; '' for a server without a key


def quantity(size: int) -> str:
    """Bytes as a Kubernetes quantity (whole Gi, rounded up)."""
    return f"{-(-size // GIB)}Gi"


def served_in_pod(facts: Facts) -> str:
    if facts.local_weights:
        return f"{WEIGHTS}/{PurePosixPath(facts.served).name}"
    return facts.served


def env_list(facts: Facts, secrets: Secrets) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in facts.env]
    if not facts.local_weights and secrets.hf_token:
        env.append(_secret("HF_TOKEN", secrets.hf_token, "token", optional=True))
    if secrets.api_key:
        env.append(_secret("VLLM_API_KEY", secrets.api_key, "api-key", optional=False))
    return env


def _secret(name: str, secret: str, key: str, *, optional: bool) -> dict[str, Any]:
    ref = {"name": secret, "key": key, "optional": optional}
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def probes(facts: Facts, secrets: Secrets) -> dict[str, Any]:
    """Startup on /health within the load's estimate; readiness on /v1/models (on /health
    with an API key: /v1 answers 401 without it); liveness on /health."""
    period = 10
    ready = "/health" if secrets.api_key else "/v1/models"
    return {
        "startupProbe": {
            "httpGet": {"path": "/health", "port": PORT},
            "periodSeconds": period,
            "failureThreshold": facts.load_seconds() // period,
        },
        "readinessProbe": {
            "httpGet": {"path": ready, "port": PORT},
            "periodSeconds": period,
            "failureThreshold": 3,
            "timeoutSeconds": 5,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": PORT},
            "periodSeconds": period,
            "failureThreshold": 3,
            "timeoutSeconds": 5,
        },
    }


def _resources(facts: Facts) -> dict[str, Any]:
    if not facts.spec.cuda:
        return {}
    gpus = {"nvidia.com/gpu": str(facts.gpus_per_node)}
    return {"requests": dict(gpus), "limits": dict(gpus)}


def volumes(facts: Facts, claim: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": quantity(facts.shm_bytes())}}
    ]
    mounts: list[dict[str, Any]] = [{"name": "shm", "mountPath": "/dev/shm"}]
    if facts.local_weights:
        volumes.append(
            {"name": "weights", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
        )
        mounts.append({"name": "weights", "mountPath": WEIGHTS, "readOnly": True})
    return volumes, mounts


def pod_spec(
    facts: Facts, secrets: Secrets, *, command: list[str], with_probes: bool = True
) -> dict[str, Any]:
    """The pod: one container ``vllm`` running ``command``."""
    assert facts.image is not None
    found, mounts = volumes(facts, f"{facts.name}-weights")
    container: dict[str, Any] = {
        "name": "vllm",
        "image": facts.image.reference,
        "command": command[:2],
        "args": command[2:],
        "ports": [{"name": "http", "containerPort": PORT}],
        "env": env_list(facts, secrets),
        "resources": _resources(facts),
        "volumeMounts": mounts,
    }
    if with_probes:
        container.update(probes(facts, secrets))
    spec: dict[str, Any] = {"containers": [container], "volumes": found}
    placed = affinity.affinity(
        facts.spec.capabilities if facts.spec.kernels_known else None,
        facts.spec.driver,
        facts.gpu_memory,
    )
    if placed:
        spec["affinity"] = placed
    return spec


def serve_command(facts: Facts) -> list[str]:
    return ["vllm", "serve", served_in_pod(facts), *facts.serve_args()]


def _metadata(facts: Facts, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {"app.kubernetes.io/name": facts.name, f"{ANNOTATION}/profile": _label(facts)},
        "annotations": facts.annotations(),
    }


def _label(facts: Facts) -> str:
    return dns_name(facts.spec.profile)


def deployment(facts: Facts, secrets: Secrets) -> dict[str, Any]:
    selector = {"app.kubernetes.io/name": facts.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(facts, facts.name),
        "spec": {
            "replicas": facts.replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": dict(selector), "annotations": facts.annotations()},
                "spec": pod_spec(facts, secrets, command=serve_command(facts)),
            },
        },
    }


def leader_worker_set(facts: Facts, secrets: Secrets) -> dict[str, Any]:
    head = shell_command(["ray", "start", "--head", f"--port={RAY_PORT}"])
    wait = shell_command(ray_wait(facts.nodes))
    leader = f"{head} && {wait} && exec {shell_command(serve_command(facts))}"
    join = shell_command(["ray", "start", "--block"])
    worker = f'{join} --address="$LWS_LEADER_ADDRESS:{RAY_PORT}"'
    labels = {"app.kubernetes.io/name": facts.name}

    def template(script: str, role: str, probed: bool) -> dict[str, Any]:
        return {
            "metadata": {"labels": {**labels, f"{ANNOTATION}/role": role}},
            "spec": pod_spec(facts, secrets, command=["bash", "-c", script], with_probes=probed),
        }

    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": _metadata(facts, facts.name),
        "spec": {
            "replicas": facts.replicas,
            "leaderWorkerTemplate": {
                "size": facts.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template(leader, "leader", True),
                "workerTemplate": template(worker, "worker", False),
            },
        },
    }


def service(facts: Facts) -> dict[str, Any]:
    selector: dict[str, str] = {"app.kubernetes.io/name": facts.name}
    if facts.nodes > 1:
        selector[f"{ANNOTATION}/role"] = "leader"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(facts, facts.name),
        "spec": {
            "selector": selector,
            "ports": [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def objects(facts: Facts, secrets: Secrets) -> list[dict[str, Any]]:
    workload = leader_worker_set(facts, secrets) if facts.nodes > 1 else deployment(facts, secrets)
    return [workload, service(facts)]
