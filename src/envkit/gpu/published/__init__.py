"""The GPU side of published builds, before anything is installed: a wheel's compiled modules read
by range (`wheelkernels`), the releases and their pinned torch read from the indexes
(`kernelgen`), the shipped table and its lookups (`kerneltable`), its incremental regeneration
(`kernelupdate`), verdicts per capability (`kernelverdict`) and whether a profile's pinned
builds run on a GPU (`profilefit`). Never imports the installed-environment assessor.
"""
