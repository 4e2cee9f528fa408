"""LAB STAND-IN for vLLM used by the spark-cluster lab (see lab/README.md)."""

__version__ = "0.11.0+lab.standin"
