#!/bin/bash
# The whole of tests/gpu on one H200 (issue 26), file by file: one device call may run 10 minutes. From the
# repository root of the device's copy, after tools/gpu_stage.py's parts are in /root/stage:
#   bash run.sh FILE...     # e.g. bash run.sh test_smoke.py test_dense.py
# Installs the staged SGLang into /root/site once, then runs pytest on each file of the carried checkout, each
# under a timeout that keeps the call within its 10 minutes; logs and records go to $OUT.
set -u
SITE=/root/site G=/root/gpu-out
[ -d $SITE/sglang ] || python3 tools/gpu_stage.py install /root/stage $SITE > $OUT/install.log 2>&1 || { tail $OUT/install.log; exit 1; }
export PYTHONPATH=$SITE
budget=560
for f in "$@"; do
  t0=$(date +%s)
  left=$((budget - (t0 - ${START:=$t0})))
  PYTHONUNBUFFERED=1 timeout $left /opt/torch/.venv/bin/python -m pytest tests/gpu/$f -v -p no:cacheprovider \
    --gpu-out $G > $OUT/pytest-${f%.py}.log 2>&1
  rc=$?
  echo "$f: rc $rc in $(( $(date +%s) - t0 )) s, started $(date -u -d @$t0 +%FT%TZ)" | tee -a $OUT/files.txt
  tail -1 $OUT/pytest-${f%.py}.log
done
mkdir -p $OUT/gpu-out && cp -r $G/. $OUT/gpu-out/ 2>/dev/null
