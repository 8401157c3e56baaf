"""The static compatibility site: gathering the data, the pages as pure functions of it, and
writing them.
"""
