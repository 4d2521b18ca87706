#!/usr/bin/env bash
# The teacher-assistant experiment of issue 16 on one classification task, every run side by side with
# the same data, seed and commands (Rotten Tomatoes by default):
#   teachers   mpnet-base (its measured recipe: encoder lr 3e-5, 2 epochs) and minilm-l6 (the defaults)
#   minilm-l6  all six layers, fine-tuned alone and distilled from the MPNet teacher (the assistant)
#   BiLSTM     alone, distilled from MPNet, from the MiniLM teacher, and through the assistant
#              (MPNet -> MiniLM-L6 student -> BiLSTM)
# with `nlp-train compare` for test scores and CPU batch-32 throughput. A run whose test metrics exist
# is skipped, so an interrupted experiment continues. MPNet needs `make mpnet` and costs about 6.5x
# MiniLM's time: on a 2-core CPU the whole experiment takes most of a day, on one GPU minutes.
#
#   scripts/teacher_assistant.sh                                          # -> runs/assistant
#   DATA=data/demo RUNS=/tmp/ta EPOCHS=1 scripts/teacher_assistant.sh     # the plumbing, quickly
set -euo pipefail
if [ $# -gt 0 ]; then  # it takes no arguments: --help prints this header instead of starting a day-long run
    if [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
        sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
        exit 0
    fi
    echo "error: $0 takes no arguments (settings come from NLP, DATA, RUNS, SEED, EPOCHS, COMPARE_LIMIT)" >&2
    exit 2
fi
NLP=${NLP:-nlp-train}
DATA=${DATA:-data/rotten_tomatoes}
RUNS=${RUNS:-runs/assistant}
SEED=${SEED:-42}
COMPARE_LIMIT=${COMPARE_LIMIT:-320}
cap=(${EPOCHS:+--epochs "$EPOCHS"})

# run NAME COMMAND OPTION...: train RUNS/NAME on the task's train/dev split, then score it on its test set
run() {
    local name=$1
    shift
    [ -f "$RUNS/$name/test_metrics.json" ] && return
    echo "== $name: $NLP $*" >&2
    $NLP "$@" --train "$DATA/train.csv" --dev "$DATA/dev.csv" --seed "$SEED" --output "$RUNS/$name" --overwrite
    $NLP evaluate "$RUNS/$name" "$DATA/test.csv" --output "$RUNS/$name/test_metrics.json" --overwrite >/dev/null
}

kd=(kd --cache-dir "$RUNS/cache" "${cap[@]}")
minilm=(--model transformer --encoder minilm-l6 --layers 6)
# the runs the targets need first, then the comparison, then the MiniLM-teacher and BiLSTM-alone references
run mpnet-teacher teacher --task classification --encoder mpnet-base --encoder-lr 3e-5 --epochs "${EPOCHS:-2}"
run minilm-alone student "${minilm[@]}" "${cap[@]}"
run minilm+kd-mpnet "${kd[@]}" --teacher "$RUNS/mpnet-teacher" "${minilm[@]}"
run lstm+kd-assistant "${kd[@]}" --teacher "$RUNS/minilm+kd-mpnet" --model lstm
run lstm+kd-mpnet "${kd[@]}" --teacher "$RUNS/mpnet-teacher" --model lstm
$NLP --threads 1 compare "$RUNS/mpnet-teacher" "$RUNS/minilm-alone" "$RUNS/minilm+kd-mpnet" "$RUNS/lstm+kd-assistant" \
    "$RUNS/lstm+kd-mpnet" --data "$DATA/test.csv" --limit "$COMPARE_LIMIT" | tee "$RUNS/compare.txt"
run minilm-teacher teacher --task classification --encoder minilm-l6 "${cap[@]}"
run lstm+kd-minilm "${kd[@]}" --teacher "$RUNS/minilm-teacher" --model lstm
run lstm-alone student --model lstm "${cap[@]}"
