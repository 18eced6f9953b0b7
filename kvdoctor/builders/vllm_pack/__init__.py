"""The vLLM knowledge-pack builder: asks each released vLLM wheel's own code for its facts and writes
kvdoctor/data/vllm_pack (`python -m kvdoctor.builders.vllm_pack --help`).

build.py drives it; wheel.py reads a wheel without running it; child.py and its tasks (child_*.py) run in a child
process of the builder's own venv (CPU torch + vLLM's pure-Python dependencies, the `[pack]` extra) and ask vLLM;
normalise.py and index.py turn the answers into the stored files. Nothing here is imported at kvdoctor's run time.
"""
