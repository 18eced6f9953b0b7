"""`kvdoctor verify URL`: prove that a running vLLM server is the configuration that was checked.

The flow: connection (HTTP) -> probe (the server's facts: /health, /version, /v1/models, /metrics, one completion)
-> compare (one finding per field against the check report's facts) -> result (VerifyReport, verdict, exit code).
credentials reads the API key from a file or the environment; checked reads the check report.
"""
