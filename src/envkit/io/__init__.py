"""The edges of envkit: child processes, uv, HTTP, the Hugging Face Hub, URLs, redaction of
secrets, and files written atomically. Nothing here imports any other envkit package but the
root's errors.
"""
