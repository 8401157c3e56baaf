"""Serving: vLLM's memory plan and model shapes, probing a running server, explaining a boot log, and starting vLLM and watching it."""
