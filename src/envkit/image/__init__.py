"""Images of lock cells: what an image of a cell is and carries (``spec``: versions, CUDA,
driver floor, kernels, OCI labels), its build context (``context``: a Containerfile and the
cell's hash-locked lock), the container builder found on PATH (``builder``: buildah, podman
or docker), and the run that builds, verifies inside, and only then tags (``make``)."""
