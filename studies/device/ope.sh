# device call 1 (staged into .gpu by studies/device_stage.py): today's default ENIGMA on airline's 27 sellers, dice.device cuda then cpu, same sentence vectors
source .gpu/setup.sh
T0=$(date +%s)
nvidia-smi > $OUT/nvidia_smi.txt 2>&1
python3 -c "import torch, transformers, pydantic, enigma.pipeline.train, enigma.agents.hf; print(torch.__version__, transformers.__version__, torch.cuda.is_available())" || exit 1
python3 -c "import enigma.encoders.weights as w; print(w.resolve_weights('minilm'))" || exit 1
T1=$(date +%s.%N); enigma encode -e data/airline/store -t data/airline/targets --no-progress 2>&1 | tail -3 | tee $OUT/encode.txt
echo "encode wall $(python3 -c "print(round($(date +%s.%N) - $T1, 1))") s" | tee -a $OUT/encode.txt
echo "setup+encode $(( $(date +%s) - T0 )) s"
python3 studies/ope_finetune_gpu.py airline --workers ${CUDA_WORKERS:-8} --row 'cuda={"device": "cuda"}' --work /tmp/dev \
  --deadline-s ${CUDA_DEADLINE:-150} --timing $OUT/timing_cuda.json --gpu-log $OUT/gpu_cuda.csv 2>&1 | grep -v "loss_type" | tail -15
python3 studies/ope_finetune_gpu.py airline --workers ${CPU_WORKERS:-12} --row 'cpu={"device": "cpu"}' --work /tmp/dev \
  --deadline-s ${CPU_DEADLINE:-140} --timing $OUT/timing_cpu.json 2>&1 | grep -v "loss_type" | tail -15
cd /tmp/dev/airline && tar czf $OUT/rows.tgz cuda/results cpu/results && cd - >/dev/null
echo "total $(( $(date +%s) - T0 )) s"
