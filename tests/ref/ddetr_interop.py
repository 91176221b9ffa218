#!/usr/bin/env python3
"""An exported Deformable DETR checkpoint loads strictly into the PyTorch
twin (bench/ref/deformable_detr_model.py, the reference's state_dict names).

  ddetr_interop.py CTRAIN WORKDIR

For shared heads and for box refinement: `ctrain train` a tiny
[model] arch = deformable_detr for 2 steps on the generated detection set
(3 backbone levels and one extra, 2 heads, 2 points, 1 + 2 layers), `ctrain
export` it, and load the file into the twin with load_state_dict(strict=
True). The only tensors the twin may have that the file lacks are the
repeats of the shared heads (class_embed.j, bbox_embed.j for j >= 1 without
box refinement: the reference's ModuleList of one module, which ctrain
stores once) and BatchNorm's num_batches_tracked (ctrain keeps none;
PyTorch fills it in when loading a state_dict without metadata); those
repeats are filled from head 0. Then every tensor of the twin must equal
the file's bit for bit, and the twin's eval forward on random images must
give finite logits and boxes in (0, 1) for every decoder layer.
Prints what it checked; exits 1 on a missing, extra or reshaped name or a
value that differs. The outputs themselves are compared with ctrain's in
tests/test_deformable_detr.c (fixtures of the same twin).
"""
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))

import interop  # noqa: E402
from check_safetensors import load  # noqa: E402
from deformable_detr_model import DeformableDETR  # noqa: E402

IMAGE, WIDTH, STAGES, BLOCKS = 32, 4, 3, 1
D, M, ENC, DEC, FF, N, L, P = 32, 2, 1, 2, 48, 5, 4, 2
SETS = interop.COMMON + [
    "run.task=detection", "model.arch=deformable_detr",
    f"data.toy_image_size={IMAGE}", "data.toy_classes=3", "data.toy_train=16",
    "data.toy_val=4", "data.batch_size=8", "optim.lr=1e-3",
    f"model.width={WIDTH}", f"model.stages={STAGES}", f"model.blocks={BLOCKS}",
    f"model.d_model={D}", f"model.heads={M}", f"model.encoder_layers={ENC}",
    f"model.decoder_layers={DEC}", f"model.ff={FF}", f"model.queries={N}",
    f"model.n_levels={L}", f"model.n_points={P}", "model.dropout=0.1",
]
REPEAT = re.compile(r"^(class_embed|bbox_embed)\.([0-9]+)\.(.*)$")


def check(name, box_refine):
    sets = SETS + [f"model.box_refine={'true' if box_refine else 'false'}"]
    ckpt = interop.train(name, sets)
    path = os.path.join(interop.WORK, name + ".safetensors")
    interop.ctrain("export", ckpt, path)
    exported = load(path)
    C = exported["backbone.0.body.conv1.weight"].shape[1]
    K = exported["class_embed.0.weight"].shape[0]
    twin = DeformableDETR(C, K, WIDTH, STAGES, BLOCKS, D, M, ENC, DEC, FF, N,
                          L, P, box_refine)
    twin_sd = interop.kept(twin.state_dict())
    full = dict(exported)
    filled = []
    for k in twin_sd:
        m = REPEAT.match(k)
        if k in exported or not m or box_refine or m.group(2) == "0":
            continue
        head0 = f"{m.group(1)}.0.{m.group(3)}"
        if head0 in exported:
            full[k] = exported[head0]
            filled.append(k)
    interop.check_names(name, twin_sd, full)
    try:
        twin.load_state_dict(full, strict=True)
    except RuntimeError as e:
        sys.exit(f"FAIL: {name}: load_state_dict(strict=True): {e}")
    loaded = interop.kept(twin.state_dict())
    differ = [k for k, v in full.items() if not torch.equal(loaded[k], v)]
    if differ:
        sys.exit(f"FAIL: {name}: values differ after loading: "
                 + ", ".join(differ))
    twin.eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        out = twin(torch.randn(2, C, IMAGE, IMAGE, generator=g))
    for i, (logits, boxes) in enumerate(out):
        if not (torch.isfinite(logits).all() and (boxes > 0).all()
                and (boxes < 1).all()):
            sys.exit(f"FAIL: {name}: decoder layer {i}: non-finite logits or "
                     "boxes outside (0, 1)")
    print(f"ok: {name}: {len(exported)} exported tensors load strictly "
          f"({len(filled)} shared-head repeats filled from head 0), equal "
          f"bit for bit; {len(out)} decoder layers' outputs finite")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    interop.CTRAIN = os.path.abspath(sys.argv[1])
    interop.WORK = sys.argv[2]
    sys.stdout.reconfigure(line_buffering=True)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    check("ddetr_shared_heads", False)
    check("ddetr_box_refine", True)
    print("ddetr_interop: both exports load strictly into the twin")


if __name__ == "__main__":
    main()
