"""Why a vLLM boot failed, from its log: the log read and normalised (`logread`), the stable codes
and their message shapes (`signatures`), what else the log says (`logfacts`), the incremental
matcher (`watch`), the facts fixes are built from (`knowledge`, `envpins`), each code's fix
(`fixcontext`, `fixmemory`, `fixsoftware`, `fixstart`), the root cause (`causes`) and two logs
compared (`logdiff`).
"""
