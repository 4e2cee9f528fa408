"""LAB STAND-IN for SGLang 0.5.23 (not SGLang): see lab/sglang_standin/README section in lab/README.md."""

__version__ = "0.5.23"
