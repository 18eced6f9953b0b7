"""Node labels and instance types in the GPU table; --gpu keeps accepting only what it accepted before."""

from __future__ import annotations

import pytest

from kvdoctor.base.errors import GpuTargetError
from kvdoctor.data.gpus import gpu_for_node_label, node_label_keys, resolve_gpu_target

PRODUCT = "nvidia.com/gpu.product"
INSTANCE = "node.kubernetes.io/instance-type"


@pytest.mark.parametrize(
    ("key", "value", "name"),
    [
        (PRODUCT, "NVIDIA-A100-SXM4-80GB", "A100 80GB"),
        (PRODUCT, "NVIDIA-A100-SXM4-40GB", "A100 40GB"),
        (PRODUCT, "NVIDIA-H100-80GB-HBM3", "H100 80GB"),
        (PRODUCT, "NVIDIA-H100-80GB-HBM3-SHARED", "H100 80GB"),  # time-slicing
        (PRODUCT, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100 40GB"),  # MIG, mixed strategy
        (PRODUCT, "Tesla-T4", "Tesla T4"),
        (PRODUCT, "Tesla-V100-SXM2-16GB", "Tesla V100 16GB"),
        (PRODUCT, "NVIDIA-L40S", "L40S"),
        ("cloud.google.com/gke-accelerator", "nvidia-tesla-a100", "A100 40GB"),
        ("cloud.google.com/gke-accelerator", "nvidia-a100-80gb", "A100 80GB"),
        ("cloud.google.com/gke-accelerator", "nvidia-h200-141gb", "H200"),
        ("cloud.google.com/gke-accelerator", "nvidia-l4", "L4"),
        ("karpenter.k8s.aws/instance-gpu-name", "l40s", "L40S"),
        (INSTANCE, "p4d.24xlarge", "A100 40GB"),
        (INSTANCE, "p5.48xlarge", "H100 80GB"),
        (INSTANCE, "g5.2xlarge", "A10G"),
        (INSTANCE, "g6.xlarge", "L4"),
        (INSTANCE, "g6e.12xlarge", "L40S"),  # not g6.*
        (INSTANCE, "a2-ultragpu-1g", "A100 80GB"),
        (INSTANCE, "a3-highgpu-8g", "H100 80GB"),
        (INSTANCE, "g2-standard-8", "L4"),
        (INSTANCE, "Standard_NC24ads_A100_v4", "A100 80GB"),
        (INSTANCE, "standard_nd96isr_h100_v5", "H100 80GB"),
        ("beta.kubernetes.io/instance-type", "g4dn.xlarge", "Tesla T4"),
    ],
)
def test_labels_name_gpus(key, value, name):
    device = gpu_for_node_label(key, value)
    assert device is not None and device.name == name


def test_unknown_values_and_keys_name_nothing():
    assert gpu_for_node_label(INSTANCE, "m5.large") is None
    assert gpu_for_node_label(PRODUCT, "NVIDIA-Imaginary-9000") is None
    assert gpu_for_node_label("kubernetes.io/hostname", "A100") is None
    assert set(node_label_keys()) >= {PRODUCT, INSTANCE, "cloud.google.com/gke-accelerator"}


@pytest.mark.parametrize("value", ["p4d.24xlarge", "nvidia-h200-141gb", "g5.xlarge"])
def test_gpu_flag_does_not_take_instance_types_or_cloud_labels(value):
    with pytest.raises(GpuTargetError):
        resolve_gpu_target(value)


def test_gpu_flag_unchanged_for_names():
    assert resolve_gpu_target("A100").name == "A100 80GB"
    assert resolve_gpu_target("h100").name == "H100 80GB"
    assert resolve_gpu_target("sm_89").capability == (8, 9)
