# kvdoctor in a container image, built from this checkout (kvdoctor is not on the package index):
#   docker build -t kvdoctor:0.1.0 .
#   docker run --rm kvdoctor:0.1.0 check --model Qwen/Qwen2.5-3B-Instruct --gpu A100 --vllm-version 0.25.1 \
#     --kv-cache-dtype turboquant_k8v4
#   docker run --rm -v "$PWD:/work" kvdoctor:0.1.0 scan deploy/ --gpu A100 --fail-on undecided
# For CI and Kubernetes (docs/ci-examples/) push it where your runners and nodes pull from:
#   docker tag kvdoctor:0.1.0 registry.example.com/kvdoctor:0.1.0 && docker push registry.example.com/kvdoctor:0.1.0
# The wheel it installs stays in /dist (docker cp a container's /dist to pip install it elsewhere).
FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY kvdoctor/ kvdoctor/
RUN pip wheel --no-deps --no-cache-dir --disable-pip-version-check -w /dist .

FROM python:3.11-slim
COPY --from=wheel /dist/ /dist/
# [compile]: Triton, for the dry-run compile of vLLM's kernels (no C compiler needed: kvdoctor only compiles them)
RUN pip install --no-cache-dir --disable-pip-version-check "$(ls /dist/kvdoctor-*.whl)[compile]" \
    && kvdoctor --version
# On a GPU node the NVIDIA container toolkit then mounts NVML, so `kvdoctor check` reads the node's real GPU
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
WORKDIR /work
ENTRYPOINT ["kvdoctor"]
CMD ["--help"]
