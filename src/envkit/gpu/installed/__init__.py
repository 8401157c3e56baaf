"""The GPU side of an installed environment: the compiled modules of a site-packages (`modules`),
their linkage against the torch beside them, C++ and stable C ABI (`linkage`), the one look at
them (`assess`) and its report (`report`) with findings (`verdicts`), and the GPU this machine
has (`detect`, named or from nvidia-smi).
"""
