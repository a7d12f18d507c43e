#!/bin/bash
# Rank-group start, before vs after a change: BASE (a `git archive` of the older tree) and this tree alternated, two
# pairs; fsdp+tp on 6 architectures, --jobs 1, the reference cache shared (warm after the first run).
# Usage: bench/bench_group_start.sh /tmp/gb   (after `git archive REV | tar -x -C /tmp/gb`)
BASE=${1:?usage: bench_group_start.sh BASE_TREE}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=$HERE/.venv/bin/python
for pair in 1 2; do
 for which in before after; do
  root=$([ $which = before ] && echo "$BASE" || echo "$HERE")
  d=/tmp/gbrun/$which$pair; rm -rf $d; mkdir -p $d
  export COMPAT_DATABASE_URL=sqlite:///$d/compat.db COMPAT_VAR_DIR=$d COMPAT_REFERENCE_CACHE_DIR=/tmp/gbrun/cache
  l0=$(cut -d' ' -f1 /proc/loadavg); t0=$(date +%s.%N)
  (cd /tmp && $PY -c "import sys; sys.path.insert(0,'$root'); sys.argv=['compat','sweep','--device','neuron','--checks','load,forward,fsdp,tp','--jobs','1','--no-decisions','--json','$d/r.json','--arch','LlamaForCausalLM','--arch','GPT2LMHeadModel','--arch','Qwen2ForCausalLM','--arch','MistralForCausalLM','--arch','PhiForCausalLM','--arch','GemmaForCausalLM']; from cli.app import main; main()" > $d/out 2>&1)
  t1=$(date +%s.%N); l1=$(cut -d' ' -f1 /proc/loadavg)
  $PY - "$d/r.json" "$which$pair" "$(echo "$t1 - $t0" | bc)" "$l0" "$l1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
fs = [x for x in r if x["check"] == "fsdp"]; tp = [x for x in r if x["check"] == "tp"]
g = sorted({round(x["metrics"].get("group_wall_s", 0), 2) for x in fs})
print(sys.argv[2], "wall", round(float(sys.argv[3]), 1), "s; fsdp+tp check time", round(sum(x["duration_s"] for x in fs + tp), 1),
      "s; group walls", g, "; statuses", sorted((x["architecture"][:8], x["check"], x["status"]) for x in fs + tp), "; load", sys.argv[4], "->", sys.argv[5])
PY
 done
done
