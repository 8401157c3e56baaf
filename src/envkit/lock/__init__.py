"""Lock matrices: cells, the torch source of a build, the locker (uv pip compile per cell), the
states on disk, publishing, and PEP 751 pylocks.
"""
