"""Programs that build kvdoctor's bundled data from vLLM's own releases (the knowledge pack, the message index).

Shipped with kvdoctor because the runtime builds a pack for a release newer than its own on the fly, in a
subprocess (`python -m kvdoctor.builders.vllm_pack`); kvdoctor never imports them. They import only the standard
library, kvdoctor's data and pack-format modules, and (in the builder's own venv) vLLM and torch.
"""
