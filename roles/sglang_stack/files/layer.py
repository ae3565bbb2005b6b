"""Layer a new venv on an image's Python (a bundle with `base`); run with the new venv's python, argv[1] the base
interpreter. The venv sees the base's site packages through a .pth, after its own (its wheels win). Where the base is
a venv, its tools that the new bin/ lacks (ninja, which FlashInfer's JIT calls; cmake) are linked into it so that the
unit's PATH finds them; never pip (it would install into the image's venv), an interpreter or an activate script.
Prints JSON: the base's site folders, the tools linked, changed."""

import json
import os
import re
import subprocess
import sys
import sysconfig

QUERY = (
    "import json, sysconfig; print(json.dumps(sorted({sysconfig.get_path('purelib'), sysconfig.get_path('platlib')})))"
)
NOT_LINKED = re.compile(r"(pip|python|activate|deactivate)")
base = sys.argv[1]
sites = json.loads(subprocess.run([base, "-c", QUERY], check=True, capture_output=True, text=True).stdout)
pth = os.path.join(sysconfig.get_path("purelib"), "_sglang_stack_base.pth")
text = "".join(f"{site}\n" for site in sites)
changed = not os.path.isfile(pth) or open(pth, encoding="utf-8").read() != text
if changed:
    with open(pth, "w", encoding="utf-8") as handle:
        handle.write(text)
base_bin, venv_bin = os.path.dirname(base), os.path.dirname(sys.executable)
# Only a venv's tools: a system interpreter's bin/ (/usr/bin) is on the unit's PATH already.
base_is_venv = os.path.isfile(os.path.join(os.path.dirname(base_bin), "pyvenv.cfg"))
linked = []
for name in sorted(os.listdir(base_bin)) if base_is_venv else []:
    source, target = os.path.join(base_bin, name), os.path.join(venv_bin, name)
    tool = os.path.isfile(source) and os.access(source, os.X_OK) and not NOT_LINKED.match(name)
    if tool and not os.path.lexists(target):
        os.symlink(source, target)
        linked.append(name)
json.dump({"sites": sites, "linked": linked, "changed": changed or bool(linked)}, sys.stdout)
