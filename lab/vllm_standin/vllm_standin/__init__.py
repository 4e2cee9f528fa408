"""LAB STAND-IN for vLLM used by the spark-cluster lab (see lab/README.md)."""

from .flags import installed_version

# "0.20.1+lab.standin": the `vllm` dist-info beside this package (set_version.py) names it.
__version__ = installed_version()
