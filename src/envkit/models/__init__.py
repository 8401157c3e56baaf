"""Models against releases: the check-model verdict from config.json, drafting and rewriting
profiles, the solver behind new-profile, and an architecture's history.
"""
