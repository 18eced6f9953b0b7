"""The facts stage: probes read the machine, the model and the serve command (probes/), collect.py assembles one
`Facts` record, and derive.py, attention.py and kv_dtypes.py add what the knowledge pack says of those inputs."""
