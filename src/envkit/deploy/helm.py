"""A ``values.yaml`` for vLLM's production-stack Helm chart (chart ``vllm-stack``, values as
its 0.1.x templates read them): one ``servingEngineSpec.modelSpec`` entry.

What the chart does with each key, and so what envkit writes:

- ``repository`` and ``tag`` are joined as ``repository:tag``: the digest goes after the tag
  (``tag@sha256:...``, which is what pulls; a digest given without a tag gets the tag
  ``pinned``);
- ``vllmConfig``: ``maxModelLen``, ``dtype``, ``gpuMemoryUtilization`` and
  ``tensorParallelSize`` become vLLM's flags; the chart always writes
  ``--enable-prefix-caching`` or ``--no-enable-prefix-caching`` from
  ``enablePrefixCaching``, so it is set true (vLLM's own default); every other plan flag
  goes in ``extraArgs``, word by word;
- ``requestCPU`` and ``requestMemory`` are required by the chart's resource block,
  ``requestGPU`` is the GPU count, ``shmSize`` the ``/dev/shm`` volume;
- ``startupProbe``, ``readinessProbe``, ``livenessProbe`` (``servingEngineSpec``'s: the chart
  probes every model alike): the load's budget, ``/v1/models`` for readiness;
- ``nodeSelectorTerms`` becomes the pod's required node affinity; ``hf_token`` as an object
  names an existing Secret (the token is never written); ``annotations`` and
  ``podAnnotations`` carry envkit's facts.

The chart runs ``vllm serve MODEL --host 0.0.0.0 --port 8000`` and those flags: that argv
is what :func:`chart_args` gives ``envkit lint``.
"""

from __future__ import annotations

from typing import Any

from envkit.deploy import affinity
from envkit.deploy.facts import GIB, PORT, Facts
from envkit.deploy.kubernetes import WEIGHTS, Secrets, probes, quantity, served_in_pod
from envkit.errors import BadInput

CHART = "vllm-stack 0.1.x (vLLM production-stack)"
_DIRECT = {
    "--max-model-len": "maxModelLen",
    "--dtype": "dtype",
    "--gpu-memory-utilization": "gpuMemoryUtilization",
}
_NUMBERS = {"maxModelLen": int, "gpuMemoryUtilization": float}


def vllm_config(facts: Facts) -> dict[str, Any]:
    config: dict[str, Any] = {"enablePrefixCaching": True}
    extra: list[str] = []
    args = list(facts.args)
    i = 0
    while i < len(args):
        word = args[i]
        key = _DIRECT.get(word)
        if key is not None and i + 1 < len(args):
            value = args[i + 1]
            config[key] = _NUMBERS[key](value) if key in _NUMBERS else value
            i += 2
            continue
        extra.append(word)
        i += 1
    if facts.gpus_per_node > 1:
        config["tensorParallelSize"] = facts.gpus_per_node
    if extra:
        config["extraArgs"] = extra
    return config


def chart_args(facts: Facts) -> list[str]:
    """The flags the chart's template writes from :func:`values` (in its order)."""
    config = vllm_config(facts)
    words = ["--host", "0.0.0.0", "--port", str(PORT), "--enable-prefix-caching"]
    if "maxModelLen" in config:
        words += ["--max-model-len", str(config["maxModelLen"])]
    if "dtype" in config:
        words += ["--dtype", str(config["dtype"])]
    if "tensorParallelSize" in config:
        words += ["--tensor-parallel-size", str(config["tensorParallelSize"])]
    if "gpuMemoryUtilization" in config:
        words += ["--gpu_memory_utilization", str(config["gpuMemoryUtilization"])]
    return [*words, *config.get("extraArgs", [])]


def _probes(facts: Facts, secrets: Secrets) -> dict[str, Any]:
    """The chart's probes (``servingEngineSpec``'s, for every model): the keys its
    ``chart.probes`` template reads, with the load's budget for the startup probe."""
    found = probes(facts, secrets)
    return {
        name: {
            "initialDelaySeconds": 0,
            "periodSeconds": probe["periodSeconds"],
            "failureThreshold": probe["failureThreshold"],
            "httpGet": {"path": probe["httpGet"]["path"], "port": PORT},
        }
        for name, probe in found.items()
    }


def values(facts: Facts, secrets: Secrets) -> dict[str, Any]:
    if facts.nodes > 1:
        raise BadInput(
            "The production-stack export writes one node's engine; its Ray cluster mode "
            "(raySpec) is not written by envkit.",
            "Export --to kubernetes for a LeaderWorkerSet across the nodes, or give "
            "--nodes 1 with --gpus-per-node.",
        )
    image = facts.image
    assert image is not None
    tag = image.tag or "pinned"
    if image.digest:
        tag = f"{tag}@{image.digest}"
    spec: dict[str, Any] = {
        "name": facts.name,
        "annotations": facts.annotations(),
        "podAnnotations": facts.annotations(),
        "repository": image.repository,
        "tag": tag,
        "modelURL": served_in_pod(facts),
        "replicaCount": facts.replicas,
        "requestCPU": 2 + 2 * facts.gpus_per_node,
        "requestMemory": quantity(facts.weights_bytes + 8 * GIB),
        "requestGPU": facts.gpus_per_node if facts.spec.cuda else 0,
        "shmSize": quantity(facts.shm_bytes()),
        "vllmConfig": vllm_config(facts),
    }
    env = [{"name": k, "value": v} for k, v in facts.env]
    if env:
        spec["env"] = env
    if not facts.local_weights and secrets.hf_token:
        spec["hf_token"] = {"secretName": secrets.hf_token, "secretKey": "token"}
    if facts.local_weights:
        claim = {"claimName": f"{facts.name}-weights", "readOnly": True}
        spec["extraVolumes"] = [{"name": "weights", "persistentVolumeClaim": claim}]
        spec["extraVolumeMounts"] = [{"name": "weights", "mountPath": WEIGHTS, "readOnly": True}]
    terms = affinity.node_selector_terms(
        facts.spec.capabilities if facts.spec.kernels_known else None,
        facts.spec.driver,
        facts.gpu_memory,
    )
    if terms:
        spec["nodeSelectorTerms"] = terms
    engine: dict[str, Any] = {"modelSpec": [spec], **_probes(facts, secrets)}
    if secrets.api_key:
        engine["vllmApiKey"] = {"secretName": secrets.api_key, "secretKey": "api-key"}
    return {"servingEngineSpec": engine}
