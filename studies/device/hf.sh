# device call 2 (staged into .gpu by studies/device_stage.py): `enigma sample` with hf: checkpoints on the GPU, through the CLI as a user runs it.
# Prepared and run here on the CPU parts only (2026-12-05): new loans paused before it reached a device. Carry .whl, .gpu/setup.sh, .gpu/hf.sh,
# .gpu/enigma, .gpu/smol, data/airline/store and data/airline-lm/checkpoints/all-step01200 (dvc repro checkpoints@airline-lm).
source .gpu/setup.sh
T0=$(date +%s)
python3 - <<'EOF' || exit 1
# SmolLM2-135M's architecture and tokenizer with random weights (seed 0): its weights cannot travel (94 MB)
import shutil, torch, yaml
from transformers import AutoConfig, AutoModelForCausalLM
torch.manual_seed(0)
cfg = AutoConfig.from_pretrained(".gpu/smol")
AutoModelForCausalLM.from_config(cfg).save_pretrained("/tmp/smol")
for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    shutil.copy(f".gpu/smol/{f}", "/tmp/smol/")
p = yaml.safe_load(open("params.yaml"))
for name, dev, bs in (("gpu128", "cuda", 128), ("gpu16", "cuda", 16), ("cpu16", "cpu", 16)):
    p["sample"]["agents"]["hf"].update(device=dev, batch_size=bs)
    yaml.safe_dump(p, open(f"/tmp/params_{name}.yaml", "w"))
EOF
# every seller but expert left out: one seller's logged agent turns (the same states in every run)
X=$(python3 -c "
import pyarrow.parquet as pq, glob
ids = sorted({a for f in glob.glob('data/airline/store/**/*.parquet', recursive=True) for a in (pq.read_table(f).column('agent_id').to_pylist() if 'agent_id' in pq.read_schema(f).names else [])})
print(' '.join('-x ' + a for a in ids if a != 'expert'))")
run() {  # name params spec out [extra]
  local t=$(date +%s.%N)
  timeout ${4:-150} enigma sample data/airline/store "$3" -o $OUT/$1.parquet --params /tmp/params_$2.yaml --cache-dir /tmp/samples_$1 --no-progress $5 2>&1 | grep -v loss_type | tail -3
  local rc=${PIPESTATUS[0]} wall=$(python3 -c "print(round($(date +%s.%N) - $t, 1))")
  local rows=$(python3 -c "import pyarrow.dataset as ds; import glob; print(ds.dataset(glob.glob('/tmp/samples_$1/*/*.parquet'), format='parquet').count_rows())" 2>/dev/null)
  echo "$1: rc $rc wall $wall s, replies in its cache $rows" | tee -a $OUT/hf_times.txt
}
CK=data/airline-lm/checkpoints/all-step01200
run lm_gpu gpu16 hf:$CK 60 "$X"
run lm_cpu cpu16 hf:$CK 60 "$X"
run smol_gpu128_all gpu128 hf:/tmp/smol 150 ""
run smol_gpu16_one gpu16 hf:/tmp/smol 45 "$X"
run smol_cpu16_one cpu16 hf:/tmp/smol 60 "$X"
echo "total $(( $(date +%s) - T0 )) s"
