"""What a transformers release provides: its run-time module rules and its own aliases
(`tfaliases`, `transformers_source`), what each module defines (`modulefacts`), and attributes
only a model's own classes define (`modeldefined`).
"""
