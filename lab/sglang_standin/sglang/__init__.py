# LAB STAND-IN: the `sglang` package name, so that `python3 -m sglang.launch_server` runs the SGLang
# stand-in (lab/sglang_standin/sglang_standin), not SGLang.
from sglang_standin import __version__  # noqa: F401
