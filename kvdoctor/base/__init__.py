"""Base utilities every stage uses: user errors, kvdoctor's cache folder, safe YAML. No stage imports above it."""
