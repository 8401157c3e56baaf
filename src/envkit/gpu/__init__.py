"""The GPU layer: known GPUs, the kernels a build carries (fatbins), the CUDA libraries and driver it needs, and whether compiled modules link against torch."""
