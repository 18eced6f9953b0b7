"""Sub-commands beyond `check`, one module each; each exposes ``register(app)``.

Modules here must import nothing heavy at module level: `kvdoctor --help` loads them all.
"""
