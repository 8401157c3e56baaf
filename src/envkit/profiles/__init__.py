"""Profiles: the TOML format in and out of a frozen Profile, its value readers, where profiles
live, and the per-architecture transformers bounds a profile records.
"""
