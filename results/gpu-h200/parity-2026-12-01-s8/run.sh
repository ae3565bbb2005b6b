#!/bin/bash
# Issue 22 item 5 on one H200: benchmarks/gpu_parity.py on the dense-large model (Qwen3-8B's shape, dummy weights),
# within one 10-minute device call. From the repository root of the device's copy, after tools/gpu_stage.py's parts
# are in /root/stage (../suite-2026-12-01/run.sh installs them the same way):
#   bash run.sh SOURCE        # SOURCE: the commit, for the record
# Figures, raw runs, the server log and the table go to $OUT (a run cut by the timeout keeps parity-raw.json).
set -u
SITE=/root/site P=/root/parity
[ -d $SITE/sglang ] || python3 tools/gpu_stage.py install /root/stage $SITE > $OUT/install.log 2>&1 || { tail $OUT/install.log; exit 1; }
export PYTHONPATH=$SITE
t0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 540 /opt/torch/.venv/bin/python benchmarks/gpu_parity.py --out $P --source "$1" \
  > $OUT/parity-stdout.log 2>&1
echo "gpu_parity.py: rc $? in $(( $(date +%s) - t0 )) s, started $(date -u -d @$t0 +%FT%TZ)" | tee $OUT/files.txt
cp $P/parity-raw.json $P/parity-table.md $OUT/ 2>/dev/null
gzip -c $P/logs/*.log > $OUT/parity-server.log.gz 2>/dev/null
tar czf $OUT/runs.tar.gz --exclude 'dataset-*' -C $P runs 2>/dev/null
tail -25 $OUT/parity-stdout.log
