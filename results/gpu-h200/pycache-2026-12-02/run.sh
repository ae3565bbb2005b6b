#!/bin/bash
# Issue 26 item 4: does a bytecode prefix the service account owns (PYTHONPYCACHEPREFIX) shorten SGLang's imports
# on the H200 image? The unit's account cannot write bytecode into the image's root-owned site-packages, of which
# about a fifth has none (../imports-2026-12-02), so today each start compiles those modules again. From the
# repository root of the device's copy, after tools/gpu_stage.py's parts are in /root/stage:   bash run.sh
set -u
SITE=/root/site PY=/opt/torch/.venv/bin/python P=/root/pyc
[ -d $SITE/sglang ] || python3 tools/gpu_stage.py install /root/stage $SITE > $OUT/install.log 2>&1 || { tail $OUT/install.log; exit 1; }
export PYTHONPATH=$SITE
{
  echo "date: $(date -u +%FT%TZ)"
  echo "$SITE: $(find $SITE -name '*.py' | wc -l) .py, $(find $SITE -name '*.pyc' | wc -l) .pyc"
  t() { local s=$(date +%s%N) rc; "$@" >/dev/null 2>&1; rc=$?; echo "$(( ($(date +%s%N) - s) / 1000000 )) ms rc $rc: ${*: -1}"; }
  L='import sglang.launch_server' S='import sglang.srt.managers.scheduler'
  nowrite() { t env PYTHONDONTWRITEBYTECODE=1 $PY -c "$1"; }
  prefix() { t env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$P $PY -c "$1"; }
  echo "-- A. as the unit's account meets the tree today: in-tree bytecode only, nothing written"
  for i in 1 2; do nowrite "$L"; done
  nowrite "$S"
  echo "-- B. PYTHONPYCACHEPREFIX=$P, empty: the first start compiles every module it imports into it"
  prefix "$L"
  echo "-- prefix after it: $(du -sh $P | cut -f1), $(find $P -name '*.pyc' | wc -l) .pyc"
  echo "-- C. the same prefix, warm: a restart"
  for i in 1 2; do prefix "$L"; done
  prefix "$S"; prefix "$S"
  echo "-- A again (order effects):"
  nowrite "$L"
  echo "-- prefix at the end: $(du -sh $P | cut -f1), $(find $P -name '*.pyc' | wc -l) .pyc"
} 2>&1 | tee $OUT/pycache.txt
