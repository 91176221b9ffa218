#!/usr/bin/env python3
"""Weights move between ctrain and PyTorch, both directions, and both sides
then compute the same logits (max |diff| <= 1e-4).

  interop.py CTRAIN WORKDIR

For each model (a ViT, a DeiT, a Swin, a CvT, and three translators: the paper's post-norm
Transformer with a tied generator, a pre-norm GELU one with its own
generator, and the attention GRU, [model] arch = rnn):
  1. ctrain -> PyTorch: `ctrain train` a tiny model for 2 steps, `ctrain
     export` it, load the file into the PyTorch twin with
     load_state_dict(strict=True) (names and shapes must match exactly),
     and compare the twin's logits with `ctrain forward` on random inputs.
  2. PyTorch -> ctrain: initialize the twin with its own (PyTorch) init,
     save its state_dict as safetensors, run `ctrain forward --weights` on
     the same inputs and compare again; then the same with unit-gain
     weights (unit_gain: O(1) logits, so small convention slips show).
The twins are bench/ref/vit_model.py (timm's ViT/DeiT layout),
bench/ref/swin_model.py (timm's SwinTransformer),
bench/ref/cvt_model.py (microsoft/CvT's layout; BatchNorm's
num_batches_tracked, which ctrain does not keep, is filled in by PyTorch's
own loading of a state_dict without metadata, so strict=True holds),
bench/ref/mt_model.py (nn/seq2seq.c's layout) and bench/ref/rnn_model.py
(nn/rnn_seq2seq.c's, the PyTorch tutorial's names). Inputs are random: images
N(0,1) (already normalized model input), token ids in [1, V) with padding
(0) at the end of some rows, passed to ctrain as float32.
Prints the max |diff| of every comparison; exits 1 if any exceeds 1e-4 or
a name or shape differs. Needs torch (Debian's python3-torch is enough);
the `safetensors` package is used when installed, else
check_safetensors.py's own reader and writer.
Not here: training-mode outputs (dropout, drop path), gradients, ResNets.
"""
import json
import os
import subprocess
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))

from check_safetensors import load, save  # noqa: E402
from cvt_model import CvT  # noqa: E402
from mt_model import Translator  # noqa: E402
from rnn_model import Seq2Seq  # noqa: E402
from swin_model import SwinTransformer  # noqa: E402
from vit_model import VisionTransformer  # noqa: E402

TOL = 1e-4
IMAGE = 16  # data.toy_image_size

COMMON = [
    "run.seed=1", "train.steps=2", "train.epochs=0", "train.eval_every=0",
    "train.checkpoint_every=0", "train.eval_sentences=0", "schedule.warmup=0",
    "schedule.kind=cosine", "data.source=toy", "data.batch_size=16",
]
VISION = COMMON + [
    "run.task=classification", f"data.toy_image_size={IMAGE}",
    "data.toy_train=64", "data.toy_val=16", "data.toy_test=16",
    "model.patch=4", "model.dim=32", "model.depth=2", "model.heads=2",
    "model.mlp_dim=64", "optim.lr=1e-3",
]
TRANSLATION_DATA = COMMON + [
    "run.task=translation", "data.toy_task=copy", "data.toy_train=64",
    "data.toy_val=8", "data.toy_test=8", "data.toy_min_len=3",
    "data.toy_max_len=8", "data.toy_symbols=20", "data.max_tokens=0",
    "model.dropout=0.1", "optim.lr=1e-3", "train.final_beam=1",
    "train.eval_beam=1",
]
TRANSLATION = TRANSLATION_DATA + [
    "model.d_model=32", "model.heads=2", "model.ff=64",
    "model.encoder_layers=2", "model.decoder_layers=1",
]
RNN = TRANSLATION_DATA + [
    "model.arch=rnn", "model.emb_dim=16", "model.enc_hidden=24",
    "model.dec_hidden=32", "train.teacher_forcing=0.5",
]
# name: (task, extra --set options)
MODELS = {
    "vit": ("classification", VISION + ["model.arch=vit"]),
    "deit": ("classification", VISION + ["model.arch=deit",
                                         "train.distillation=none"]),
    # patch 2: an 8x8 map, windows of 4 (shifted blocks), then a 4x4 map
    # that is one window.
    "swin": ("classification", VISION + [
        "model.arch=swin", "model.patch=2", "model.dim=16",
        "model.depths=2,2", "model.stage_heads=2,4", "model.window=4",
        "model.mlp_ratio=2"]),
    "cvt": ("classification", VISION + [
        "model.arch=cvt", "model.cvt_dims=16,32", "model.cvt_depths=1,2",
        "model.cvt_heads=1,2", "model.cvt_embed_kernel=3,3",
        "model.cvt_embed_stride=2,2", "model.cvt_embed_padding=1,1",
        "model.cvt_mlp_ratio=2"]),
    "mt_postnorm_tied": ("translation", TRANSLATION),
    "mt_prenorm_gelu_untied": ("translation", TRANSLATION + [
        "model.norm_first=true", "model.activation=gelu",
        "model.tie_output=false"]),
    "rnn_attention_gru": ("translation", RNN),
}


def setting(sets, key, default=None):
    """The value of `key` in a list of --set options (the last wins)."""
    return next((s.split("=", 1)[1] for s in reversed(sets)
                 if s.startswith(key + "=")), default)


def ctrain(*args):
    """Runs ctrain (train and forward on one thread: the models are tiny);
    its stdout, or exits with its stderr."""
    threads = ["--threads", "1"] if args[0] in ("train", "forward") else []
    r = subprocess.run([CTRAIN, *args, *threads], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: ctrain {' '.join(args[:2])} exited {r.returncode}:\n"
                 f"{r.stderr[-2000:]}")
    return r.stdout


def train(name, sets):
    """A 2-step run of `sets`; the checkpoint path."""
    empty = os.path.join(WORK, "empty.ini")
    open(empty, "w").close()
    args = ["train", empty, "--set", f"run.dir={WORK}/runs",
            "--set", f"run.name={name}"]
    for s in sets:
        args += ["--set", s]
    final = json.loads(ctrain(*args).strip().splitlines()[-1])
    return final["checkpoint"]


def build_twin(task, sets, shapes):
    """The PyTorch twin of the model `sets` describe; sizes the config does
    not fix (channels, classes, vocabularies) come from the export's
    shapes."""
    if task == "classification" and setting(sets, "model.arch") == "swin":
        D, C, P, _ = shapes["patch_embed.proj.weight"]
        return SwinTransformer(
            img_size=IMAGE, patch=P, in_chans=C,
            num_classes=shapes["head.fc.weight"][0], embed_dim=D,
            depths=[int(v) for v in setting(sets, "model.depths").split(",")],
            heads=[int(v)
                   for v in setting(sets, "model.stage_heads").split(",")],
            window=int(setting(sets, "model.window")),
            mlp_ratio=float(setting(sets, "model.mlp_ratio")))
    if setting(sets, "model.arch") == "cvt":
        lists = [[int(v) for v in setting(sets, "model.cvt_" + k).split(",")]
                 for k in ("embed_kernel", "embed_stride", "embed_padding",
                           "dims", "depths", "heads")]
        return CvT(shapes["stage0.patch_embed.proj.weight"][1],
                   shapes["head.weight"][0], list(zip(*lists)),
                   mlp_ratio=float(setting(sets, "model.cvt_mlp_ratio")))
    if task == "classification":
        D, C, P, _ = shapes["patch_embed.proj.weight"]
        return VisionTransformer(
            img_size=IMAGE, patch_size=P, in_chans=C,
            num_classes=shapes["head.weight"][0], embed_dim=D,
            depth=int(setting(sets, "model.depth")),
            num_heads=int(setting(sets, "model.heads")),
            mlp_dim=int(setting(sets, "model.mlp_dim")),
            distilled=setting(sets, "model.arch") == "deit")
    if setting(sets, "model.arch") == "rnn":
        return Seq2Seq(shapes["encoder.embedding.weight"][0],
                       shapes["decoder.embedding.weight"][0],
                       int(setting(sets, "model.emb_dim")),
                       int(setting(sets, "model.enc_hidden")),
                       int(setting(sets, "model.dec_hidden")),
                       float(setting(sets, "model.dropout")))
    return Translator(
        shapes["src_emb.weight"][0], int(setting(sets, "model.d_model")),
        int(setting(sets, "model.encoder_layers")),
        int(setting(sets, "model.heads")), int(setting(sets, "model.ff")),
        float(setting(sets, "model.dropout")),
        tgt_vocab=shapes["tgt_emb.weight"][0],
        decoder_layers=int(setting(sets, "model.decoder_layers")),
        activation=setting(sets, "model.activation", "relu"),
        norm_first=setting(sets, "model.norm_first", "false") == "true",
        tie_output=setting(sets, "model.tie_output", "true") == "true")


def kept(state_dict):
    """A twin's state_dict without BatchNorm's num_batches_tracked, which
    ctrain does not keep (nn/conv.h)."""
    return {k: v for k, v in state_dict.items()
            if not k.endswith("num_batches_tracked")}


def check_names(name, twin_sd, exported):
    """Fails with every name or shape that differs between the twin's
    state_dict and ctrain's export."""
    twin_sd = kept(twin_sd)
    problems = [f"only in PyTorch: {k} {list(v.shape)}"
                for k, v in twin_sd.items() if k not in exported]
    problems += [f"only in ctrain: {k} {list(v.shape)}"
                 for k, v in exported.items() if k not in twin_sd]
    problems += [f"shape of {k}: PyTorch {list(v.shape)}, ctrain "
                 f"{list(exported[k].shape)}" for k, v in twin_sd.items()
                 if k in exported and v.shape != exported[k].shape]
    if problems:
        sys.exit(f"FAIL: {name}: the twin's parameters differ from ctrain's:\n  "
                 + "\n  ".join(problems))


def make_inputs(task, twin, g):
    """Random inputs (float32, as `ctrain forward` reads them)."""
    if isinstance(twin, CvT):
        C = twin.stage0.patch_embed.proj.in_channels
        return {"images": torch.randn(4, C, IMAGE, IMAGE, generator=g)}
    if task == "classification":
        C = twin.patch_embed.proj.in_channels
        return {"images": torch.randn(4, C, IMAGE, IMAGE, generator=g)}
    if isinstance(twin, Seq2Seq):
        Vs = twin.encoder.embedding.num_embeddings
        Vt = twin.decoder.embedding.num_embeddings
    else:
        Vs, Vt = twin.src_emb.num_embeddings, twin.tgt_emb.num_embeddings
    src = torch.randint(1, Vs, (4, 7), generator=g)
    tgt = torch.randint(1, Vt, (4, 6), generator=g)
    src[1, 5:] = 0  # padding at the end of some rows, never a whole row
    src[3, 3:] = 0
    tgt[2, 4:] = 0
    tgt[3, 2:] = 0
    return {"src": src.float(), "tgt_in": tgt.float()}


@torch.no_grad()
def twin_outputs(task, twin, inputs):
    """What `ctrain forward` writes, computed by the twin in eval mode."""
    twin.eval()
    if task == "translation":
        return {"logits": twin(inputs["src"].long(), inputs["tgt_in"].long())}
    out = {"logits": twin(inputs["images"])}
    if getattr(twin, "distilled", False):
        x = twin.forward_features(inputs["images"])
        out["logits_cls"] = twin.head(x[:, 0])
        out["logits_dist"] = twin.head_dist(x[:, 1])
    return out


def compare(label, want, got):
    """Prints the max |diff| of every output; True when all are within TOL."""
    ok = set(want) == set(got)
    if not ok:
        print(f"FAIL: {label}: outputs {sorted(got)}, expected {sorted(want)}")
    for k in sorted(set(want) & set(got)):
        if want[k].shape != got[k].shape:
            print(f"FAIL: {label}: {k} shape {list(got[k].shape)}, expected "
                  f"{list(want[k].shape)}")
            ok = False
            continue
        diff = (want[k].double() - got[k].double()).abs().max().item()
        scale = want[k].abs().max().item()
        good = diff <= TOL
        ok = ok and good
        print(f"{'ok' if good else 'FAIL'}: {label}: {k} {list(got[k].shape)} "
              f"max |diff| {diff:.3g} (max |logit| {scale:.3g})")
    return ok


def forward(ckpt, inputs, stem, weights=None):
    """`ctrain forward` on `inputs`; its outputs."""
    path_in = os.path.join(WORK, stem + ".in.safetensors")
    path_out = os.path.join(WORK, stem + ".out.safetensors")
    save(inputs, path_in)
    extra = ["--weights", weights] if weights else []
    ctrain("forward", ckpt, path_in, path_out, *extra)
    return load(path_out)


@torch.no_grad()
def unit_gain(twin, g):
    """Redraws every parameter so that activations and logits are O(1):
    matrices N(0, 1/fan_in), tokens and position tables N(0, 1), vectors
    (norms, biases) 1 or 0 plus N(0, 0.1^2). With timm's init (std .02) a
    ViT's logits are ~0.1, and a twin with tanh instead of erf GELU moved
    them by 5e-7 (passes); with these weights by 2e-4 (fails). Also no
    tensor keeps a constant init (ones, zeros) that could hide one ctrain
    failed to replace."""
    for name, p in twin.named_parameters():
        noise = torch.randn(p.shape, generator=g)
        if p.ndim == 1:
            norm = "norm" in name or ".bn." in name
            base = 1.0 if norm and name.endswith("weight") else 0.0
            p.copy_(base + 0.1 * noise)
        elif p.shape[0] == 1:
            p.copy_(noise)
        else:
            p.copy_(noise / p[0].numel() ** 0.5)


def forward_with(twin, ckpt, inputs, stem):
    """`ctrain forward --weights` with the twin's state_dict."""
    weights = os.path.join(WORK, stem + ".weights.safetensors")
    save({k: v.contiguous() for k, v in kept(twin.state_dict()).items()},
         weights,
         {"format": "pt"})
    return forward(ckpt, inputs, stem, weights)


def check_model(name, task, sets, g):
    ckpt = train(name, sets)
    exported_path = os.path.join(WORK, name + ".safetensors")
    ctrain("export", ckpt, exported_path)
    exported = load(exported_path)
    shapes = {k: list(v.shape) for k, v in exported.items()}

    # ctrain -> PyTorch.
    twin = build_twin(task, sets, shapes)
    check_names(name, twin.state_dict(), exported)
    twin.load_state_dict(exported, strict=True)
    inputs = make_inputs(task, twin, g)
    own = forward(ckpt, inputs, name)
    ok = compare(f"{name} ctrain->torch", twin_outputs(task, twin, inputs), own)

    # PyTorch -> ctrain: a fresh twin with PyTorch's own init, then the same
    # twin with unit-gain weights.
    twin = build_twin(task, sets, shapes)
    for label, stem in (("", ".torch"), (" unit-gain", ".unit")):
        if stem == ".unit":
            unit_gain(twin, g)
        got = forward_with(twin, ckpt, inputs, name + stem)
        ok = compare(f"{name} torch->ctrain{label}",
                     twin_outputs(task, twin, inputs), got) and ok
        # The replaced weights must matter: ctrain's own logits differ.
        moved = (own["logits"] - got["logits"]).abs().max().item()
        if moved <= 100 * TOL:
            print(f"FAIL: {name}: --weights barely changed the logits "
                  f"(max |diff| {moved:.3g})")
            ok = False
    return ok


def main():
    global CTRAIN, WORK
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    CTRAIN, WORK = os.path.abspath(sys.argv[1]), sys.argv[2]
    sys.stdout.reconfigure(line_buffering=True)  # in order with stderr
    torch.set_num_threads(1)
    # torch 1.13's encoder fast path (eval, key padding) says it is a
    # prototype at every call.
    warnings.filterwarnings("ignore", message=".*nested tensors")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    failed = [name for name, (task, sets) in MODELS.items()
              if not check_model(name, task, sets, g)]
    if failed:
        sys.exit(f"interop: {len(failed)} of {len(MODELS)} models differ: "
                 + ", ".join(failed))
    print(f"interop: all {len(MODELS)} models agree within {TOL:g} both ways")


if __name__ == "__main__":
    main()
