"""A fleet of nodes against one lock cell: each node's facts (``fingerprint``: host,
platform, GPUs, driver, installed distributions and whether their files are intact, Python,
Ray, ``/dev/shm``, the InfiniBand devices, the ``VLLM_*``/``NCCL_*`` variables, masked),
gathered here (``gather``, ``records``) or through Ray (``raynodes``), or read from files any
launcher made (``fingerprint.read``); each judged against the profile's lock cell and the GPU
layer (``lockcell``, ``judge``)."""
