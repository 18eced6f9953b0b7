"""Every output kvdoctor writes: check's report formats (formats/), scan's (scan/) and matrix's (matrix/)."""
