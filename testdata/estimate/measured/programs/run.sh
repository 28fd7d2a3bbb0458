#!/bin/bash
# One device session: estimate matrix, generate() peaks, the cs336 medium program at four lengths.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
G=$PWD/.gpu; R=/tmp/res; mkdir -p $R/est $R/gen $R/cs336 $G/cs336/results
START=$(date +%s); export MM_DEADLINE=$((START+330))
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import torch,transformers,peft;print(torch.__version__,transformers.__version__,peft.__version__)"; } > $R/gpu.txt 2>&1
cs() { # $1 = true|false (autocast)
  local n=medium_$([ $1 = true ] && echo amp || echo fp32)
  cd $G/cs336/run
  for L in 128 256 512 1024; do
    [ $(date +%s) -gt $((START+300)) ] && { echo "out of time before $n $L"; break; }
    echo "== $n $L $(date +%s)"
    PYTHONPATH=$G/cs336/pkg python3 nsys_profile.py --vocab_size 10000 --context_length $L --d_model 1024 --num_layers 24 --num_heads 16 --d_ff 4096 --model_name $n --memory-profiler pytorch --pattern full-training-step --autocast $1 --warmup-steps 5
  done
}
( cs false > $R/cs336/log_fp32.txt 2>&1 ) & P1=$!
( cs true > $R/cs336/log_amp.txt 2>&1 ) & P2=$!
( GEN_SECONDS=280 python3 $G/gen_measure.py $R/gen --snapshot > $R/gen/log.txt 2>&1 ) &
( python3 $G/measure_matrix.py $R/est > $R/est/log.txt 2>&1
  while kill -0 $P1 2>/dev/null || kill -0 $P2 2>/dev/null; do sleep 2; done
  python3 $G/measure_matrix.py $R/est big_ >> $R/est/log.txt 2>&1 ) &
wait
echo "done after $(( $(date +%s) - START )) s" >> $R/gpu.txt
