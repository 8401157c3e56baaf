"""What vLLM's source reaches and when: who loads each file and who calls a function in it
(`loading`, `callers`), code only checkpoints of one format reach (`formats`), and guards on
transformers' version, fallback imports and probes (`conditions`, `guards`).
"""
