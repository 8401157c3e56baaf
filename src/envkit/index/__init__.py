"""The package index: index pages within byte and entry caps, wheels read by range, archives
read within bounds of work, and module-level tables evaluated from a wheel's source.
"""
