"""Engines: ``envkit export`` writes the files Kubernetes (a Deployment or LeaderWorkerSet
and a Service), vLLM's production-stack Helm chart, KServe, Ray and Slurm run a profile's
vLLM with; every file carries the lock cell, the plan's flags, the GPU layer's placement and
envkit's verdicts (``facts``), and every flag in it passes ``envkit lint`` first."""
