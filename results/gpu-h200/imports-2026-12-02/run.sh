#!/bin/bash
# Issue 26 item 4: where the 42-53 s before SGLang's first model line go. Python imports of sglang.launch_server on
# the H200 image, timed as the unit's process would meet them. From the repository root of the device's copy, after
# tools/gpu_stage.py's parts are in /root/stage:   bash run.sh
set -u
SITE=/root/site PY=/opt/torch/.venv/bin/python
[ -d $SITE/sglang ] || python3 tools/gpu_stage.py install /root/stage $SITE > $OUT/install.log 2>&1 || { tail $OUT/install.log; exit 1; }
export PYTHONPATH=$SITE
SP=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
{
  echo "date: $(date -u +%FT%TZ)"
  echo "PYTHON* variables: $(env | grep ^PYTHON | tr '\n' ' ')"
  echo "image site-packages $SP: $(find $SP -name '*.py' | wc -l) .py, $(find $SP -name '*.pyc' | wc -l) .pyc"
  echo "$SITE: $(find $SITE -name '*.py' | wc -l) .py, $(find $SITE -name '*.pyc' | wc -l) .pyc"
  t() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; echo "$(( ($(date +%s%N) - s) / 1000000 )) ms: ${*: -1}"; }
  imp='import sglang.launch_server'
  echo "-- import sglang.launch_server (wall ms), bytecode not written (as the unit's user meets a root-owned tree):"
  for i in 1 2; do t env PYTHONDONTWRITEBYTECODE=1 $PY -c "$imp"; done
  echo "-- with PYTHONPYCACHEPREFIX=/root/pyc (1st compiles into it, then reads):"
  for i in 1 2 3; do t env PYTHONPYCACHEPREFIX=/root/pyc $PY -c "$imp"; done
  echo "-- prefix folder: $(du -sh /root/pyc | cut -f1), $(find /root/pyc -name '*.pyc' | wc -l) .pyc"
  echo "-- bytecode written beside the sources as root (1st writes, then reads):"
  for i in 1 2 3; do t $PY -c "$imp"; done
  echo "-- the scheduler's module too (what the spawned child imports):"
  t env PYTHONPYCACHEPREFIX=/root/pyc $PY -c 'import sglang.srt.managers.scheduler'
  t env PYTHONDONTWRITEBYTECODE=1 $PY -c 'import sglang.srt.managers.scheduler'
  PYTHONPYCACHEPREFIX=/root/pyc $PY -X importtime -c "$imp" 2> $OUT/importtime-warm.txt
  PYTHONDONTWRITEBYTECODE=1 $PY -X importtime -c "$imp" 2> $OUT/importtime-nopyc.txt
  echo "-- top cumulative (us), warm prefix:"; awk -F'|' '{print $2+0, $3}' $OUT/importtime-warm.txt | sort -n -r | head -25
  echo "-- top self (us), no bytecode:"; awk -F'|' '{split($1,a,":"); print a[2]+0, $3}' $OUT/importtime-nopyc.txt | sort -n -r | head -15
} 2>&1 | tee $OUT/imports.txt
gzip -f $OUT/importtime-*.txt
