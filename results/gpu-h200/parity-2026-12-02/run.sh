#!/bin/bash
# Issue 22 item 5, the levels the 2026-12-01 run (../parity-2026-12-01-s8) left out, on one H200 in one 10-minute
# device call. From the repository root of the device's copy, after tools/gpu_stage.py's parts are in /root/stage:
#   [PARITY_TIMEOUT=S] bash run.sh SOURCE LEVEL-FLAGS...   # e.g. bash run.sh "commit X" --levels ''   (the request rates only)
# Figures, raw runs, the server log and the table go to $OUT/NAME (a run cut by the timeout keeps parity-raw.json).
set -u
SITE=/root/site P=/root/parity-$(date +%s)
[ -d $SITE/sglang ] || python3 tools/gpu_stage.py install /root/stage $SITE > $OUT/install.log 2>&1 || { tail $OUT/install.log; exit 1; }
# A site staged before gpu_stage byte-compiled (the image sets PYTHONDONTWRITEBYTECODE=1): compile it once.
[ -n "$(find $SITE/sglang -maxdepth 2 -name '*.pyc' -print -quit)" ] || { s=$(date +%s); /opt/torch/.venv/bin/python -m compileall -q -j 0 $SITE >/dev/null; echo "compileall: $(( $(date +%s) - s )) s"; }
export PYTHONPATH=$SITE
src=$1; shift
t0=$(date +%s)
PYTHONUNBUFFERED=1 timeout ${PARITY_TIMEOUT:-470} /opt/torch/.venv/bin/python benchmarks/gpu_parity.py --out $P --source "$src" "$@" \
  > $OUT/parity-stdout.log 2>&1
echo "gpu_parity.py $*: rc $? in $(( $(date +%s) - t0 )) s, started $(date -u -d @$t0 +%FT%TZ)" | tee $OUT/files.txt
cp $P/parity-raw.json $P/parity-table.md $OUT/ 2>/dev/null
gzip -c $P/logs/*.log > $OUT/parity-server.log.gz 2>/dev/null
tar czf $OUT/runs.tar.gz --exclude 'dataset-*' -C $P runs 2>/dev/null
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/left on the GPU: /'
tail -30 $OUT/parity-stdout.log
