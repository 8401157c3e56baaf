"""Whether a `vllm serve` command line and its `VLLM_*` variables are accepted by a profile's
release: the check (`check`), the arguments read from compose files, Helm values, Deployments
and scripts (`files`), and how plan, serve and explain use it (`use`).
"""
