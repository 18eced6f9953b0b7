"""The message-index builder: every error message vLLM and its dependencies can print, as templates with their
locations and releases (`python -m kvdoctor.builders.message_index --help`); read by kvdoctor/explain.

templates.py finds messages in source, sources.py reads wheels and installed packages, packing.py stores them.
"""
