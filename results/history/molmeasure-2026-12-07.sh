#!/bin/bash
# usage: molmeasure.sh DIR  -> prints "proc_cpu container_cpu wall"
cd "$1"
export PATH=/work/main/.venv/bin:$PATH SGLANG_LAB_IMAGE=sglang-deploy/lab:bookworm-4c44b329da01 PY_COLORS=0 ANSIBLE_FORCE_COLOR=0
( last=0; while true; do id=$(docker inspect -f '{{.Id}}' molecule-modelx 2>/dev/null); if [ -n "$id" ] && [ -f /sys/fs/cgroup/cpuacct/docker/$id/cpuacct.usage ]; then last=$(awk "{print \$1/1e9}" /sys/fs/cgroup/cpuacct/docker/$id/cpuacct.usage); echo $last > /tmp/molx.cont; fi; sleep 1; done ) &
P=$!
echo 0 > /tmp/molx.cont
/usr/bin/time -f "%U %S %e" -o /tmp/molx.time molecule test -s modelx > /tmp/molx-$(basename $1).log 2>&1
rc=$?
kill $P
read u s e < /tmp/molx.time
echo "$(basename $1) rc=$rc proc=$(echo "$u+$s"|bc) cont=$(cat /tmp/molx.cont) wall=$e"
