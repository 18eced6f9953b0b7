"""The API-history builder: which vLLM releases have each module, top-level name, class member and parameter
(`python -m kvdoctor.builders.api_history --help`); read by kvdoctor/explain/api_history.py.

extract.py reads one module's names from its source (AST, nothing imported), sources.py reads wheels (local ones
whole, the releases between them by HTTP range requests), bisect.py finds where a module changed between two
releases read whole, packing.py stores release ranges.
"""
