"""Environments: building a venv atomically, owning and swapping it, the facts gathered inside it,
verifying it, finding interpreters, and doctor.
"""
