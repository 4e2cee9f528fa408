"""LAB STAND-IN: `python3 -m sglang.launch_server ARGS` (SGLang 0.5.23's sglang/launch_server.py)."""

import sys

from sglang_standin.launch import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
