"""Whether a vLLM release and a transformers release run together, read from their wheels: the API
surface, transformers' run-time module rules, the checker, its scope, how other commands obey
it, and bisection of removals.
"""
