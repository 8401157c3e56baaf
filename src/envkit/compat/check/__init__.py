"""The check of one vLLM x transformers pair: vLLM's sources as compat reads them (`sources`), what
vLLM does at start-up that a release can refuse (`startup`: `registrations`, `configfields`,
`nestedrope`), the checker (`checker`), how other commands obey it (`enforcement`) and bisection
of removals (`removed_in`).
"""
