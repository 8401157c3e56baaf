"""The package index: index pages and wheels read by range, the index session every reader shares,
and module-level tables evaluated from a wheel's source.
"""
