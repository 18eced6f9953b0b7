"""`kvdoctor scan`: find the vLLM workloads in Kubernetes manifests, Compose files and Helm values, and check each.

Flow: files -> YAML nodes with line marks (documents) -> workloads (kubernetes, compose, helm_values) ->
one `kvdoctor check` each plus the deployment's own rules (judge) -> ScanReport -> scan formats.
"""
