"""`kvdoctor verify`'s formats: thin adapters from a VerifyReport to the shared builders (junit, github, markdown)."""
