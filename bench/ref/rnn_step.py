"""PyTorch twin of bench/step's rnn_mt_b64 config: ms per training step
(forward + backward + clip + Adam) of the attention GRU translator.

rnn_mt_b64: vocab 1000 (source and target), embeddings 256, bidirectional
encoder GRU 512, decoder GRU 512 (the PyTorch tutorial's sizes), dropout
0.5 on the embeddings, teacher forcing 1, source length 24, target length
25, batch 64, label smoothing 0.1, Adam betas (0.9, 0.98) eps 1e-9,
gradient clipping at norm 1.

The model is bench/ref/rnn_model.py's Seq2Seq, nn/rnn_seq2seq.c's twin:
nn.GRU over packed sequences in the encoder (PyTorch's own CPU kernels),
nn.GRU one step at a time in the decoder, the attention's keys projected
once per batch. The batch is drawn as bench/ref/mt_step.py draws it (the
rule of bench/step.c).

Prints one line (bench/ref/step_timer.py): `torch config=rnn_mt_b64
threads=N ms_per_step=.. peak_mb=.. (median of R)`.
Run with Debian's python3-torch:
  /usr/bin/python3 bench/ref/rnn_step.py --threads 2 [--precision bf16]
"""
import argparse

import torch

from mt_step import time_translator
from rnn_model import Seq2Seq
from step_timer import add_args

CONFIGS = {
    # name: (vocab, emb, enc_hidden, dec_hidden, src_len, tgt_len, batch)
    "rnn_mt_b64": (1000, 256, 512, 512, 24, 25, 64),
}


def main():
    ap = argparse.ArgumentParser()
    add_args(ap, "rnn_mt_b64")
    args = ap.parse_args()
    if args.config not in CONFIGS:
        ap.error(f"unknown config {args.config}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    V, E, He, Hd, S, T, B = CONFIGS[args.config]
    time_translator(args, Seq2Seq(V, V, E, He, Hd, dropout=0.5), V, S, T, B)


if __name__ == "__main__":
    main()
