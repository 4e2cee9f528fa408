"""Make this stand-in play vLLM VERSION: `python3 -m vllm_standin.set_version VERSION [--site DIR]`.

Writes the dist-info of a distribution named `vllm` (version VERSION+lab.standin) into DIR
(default: the site-packages this package is in), replacing any other `vllm` dist-info there.
That dist-info is the one piece of configuration: `vllm --version`, `importlib.metadata.version
("vllm")` and the flag table (flags.py) all read it. lab/lib/nodes.sh runs this for each node's
/opt/lab-venv, lab-docker-image inside each image it makes.

Probe, act, verify: a version without a flag table is refused; nothing is written when the right
dist-info is already there; the result is read back with importlib.metadata in a fresh process.
"""

import argparse
import os
import shutil
import subprocess
import sys

from .flags import LOCAL_PART, load_table


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m vllm_standin.set_version", description=__doc__.split("\n\n")[0])
    ap.add_argument("version", help="a vLLM release with a flag table, e.g. 0.20.1")
    ap.add_argument("--site", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the site-packages directory (default: this package's)")
    a = ap.parse_args(argv)
    table = load_table(a.version)                      # refuses a version without a table
    version = f"{table['version']}+{LOCAL_PART}"
    dist_info = os.path.join(a.site, f"vllm-{version}.dist-info")
    metadata = (f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
                f"Summary: LAB STAND-IN for vLLM {table['version']} (spark-cluster lab): not vLLM; its flags "
                f"come from {table['wheel']}\n")
    current = os.path.join(dist_info, "METADATA")
    if os.path.exists(current) and open(current, encoding="utf-8").read() == metadata:
        changed = False
    else:
        for name in os.listdir(a.site):
            if name.lower().startswith("vllm-") and name.endswith(".dist-info"):
                shutil.rmtree(os.path.join(a.site, name))
        os.makedirs(dist_info)
        with open(current, "w", encoding="utf-8") as fh:
            fh.write(metadata)
        with open(os.path.join(dist_info, "INSTALLER"), "w", encoding="utf-8") as fh:
            fh.write("lab\n")
        changed = True
    # Verify as vLLM itself would look: the distribution `vllm` on that path.
    probe = ("import importlib.metadata, sys; "
             "print(next(d.version for d in importlib.metadata.distributions(path=[sys.argv[1]]) "
             "if d.metadata['Name'] == 'vllm'))")
    got = subprocess.run([sys.executable, "-c", probe, a.site], capture_output=True, text=True).stdout.strip()
    if got != version:
        print(f"set_version: {a.site} reports vllm {got or '(none)'}, expected {version}", file=sys.stderr)
        return 1
    print(f"vllm {version} ({'set' if changed else 'already set'}) in {a.site}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
