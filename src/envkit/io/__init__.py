"""The edges of envkit: child processes, uv, HTTP and its budget, the Hugging Face Hub, URLs,
redaction of secrets, files written atomically, small files read within caps, and the
validated on-disk cache. Nothing here imports any other envkit package but the root's errors.
"""
