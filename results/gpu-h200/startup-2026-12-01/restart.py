"""One restart of the lab's unit and where its start went, read the way the role reads it (issue 26, item 4).

Run inside the GPU lab (tools/gpu_lab.py exec) with the checkout's src/ on PYTHONPATH and the server's key in
SGLANG_LAB_API_KEY: `python3 restart.py NAME warm|cold`. cold empties the stack's cache folders under
/var/cache/sglang first (JIT and compile caches: FlashInfer, Triton, TorchInductor, DeepGEMM, ...). Then
`systemctl restart sglang`, the readiness wait of the sglang_ready module (host/readiness.wait_ready, with the unit
watched), and the journal report of host/startup.py: one JSON line on stdout.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import time

from sglang_deploy.host import readiness, startup

name, caches = sys.argv[1], sys.argv[2]
if caches == "cold":
    for folder in glob.glob("/var/cache/sglang/*/*"):
        shutil.rmtree(folder) if os.path.isdir(folder) and not os.path.islink(folder) else os.remove(folder)
t0 = time.monotonic()
# The unit allows a few starts in a row (StartLimitBurst); the role clears the count before a deliberate restart too.
subprocess.run(["systemctl", "reset-failed", "sglang"], check=False)
subprocess.run(["systemctl", "restart", "sglang"], check=True)
readiness.wait_ready(
    "http://127.0.0.1:30000", timeout=900, api_key=os.environ["SGLANG_LAB_API_KEY"], unit="sglang"
)
ready = time.monotonic()
report = startup.read_journal("sglang", ready_at=ready)
print(json.dumps({"name": name, "caches": caches, "restart_to_ready_s": round(ready - t0, 1), **report}))
