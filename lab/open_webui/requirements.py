"""Writes the pinned requirements of the lab's Open WebUI layer (lab/lib/image.sh, build_open_webui_layer).

Reads RESOLVED, uv's resolution of open-webui==VERSION for the layer's venv (`uv pip compile`,
one `name==version` line per distribution, for the nodes' Debian 12 python3.11 on linux x86_64),
and prints one `name==version` line per distribution to install, less
the torch family: torch, triton and the nvidia-*/cuda-* wheels torch pulls (about 2.6 GB of wheels,
5 GB installed). Open WebUI imports torch only for its local models (the embedding model for
documents, the reranker, whisper), which the lab cannot download anyway; chat goes to the
cluster's OpenAI-compatible endpoint. The left-out distributions go to stderr, and the layer lists
them in /opt/lab-open-webui/LAB-LEFT-OUT.txt. The product installs the full set
(`pip install open-webui==VERSION`).

usage: python requirements.py RESOLVED > requirements.txt 2> left-out.txt
"""

import re
import sys

LEFT_OUT = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.*|cuda-.*)$")


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    for line in lines:
        raw, version = line.split("==", 1)
        name = re.sub(r"[-_.]+", "-", raw).lower()
        print(f"{name}=={version}", file=sys.stderr if LEFT_OUT.match(name) else sys.stdout)


if __name__ == "__main__":
    main()
