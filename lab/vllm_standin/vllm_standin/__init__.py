"""LAB STAND-IN for vLLM used by the spark-cluster lab (see lab/README.md)."""

from .flags_generated import VLLM_VERSION

__version__ = f"{VLLM_VERSION}+lab.standin"
