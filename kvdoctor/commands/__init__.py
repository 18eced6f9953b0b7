"""The sub-commands, one module each; each exposes ``register(app)``. _run holds what they share.

Modules here must import nothing heavy at module level: `kvdoctor --help` loads them all.
"""

COMMANDS = ("check", "catalog", "explain", "matrix", "scan", "verify")
"""Registration order, which is the order `kvdoctor --help` lists them in."""
