"""Isolation backends for running untrusted programs (bubblewrap, Docker).

Example:
    >>> import sandboxes
    >>> sandboxes.__name__
    'sandboxes'

Empty for now: the code domain (a later issue) adds the ``Sandbox`` interface and backends.
"""
