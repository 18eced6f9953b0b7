"""Build kvdoctor/data/vllm_pack/architectures.json: every model architecture each pack release registers, read
statically (ast) from the release's model registry fetched by range requests from its wheel."""
