"""PyTorch twin of bench/step's mt_toy_b64 config: ms per training step
(forward + backward + Adam) of an encoder-decoder Transformer.

mt_toy_b64: vocab 1000 (source and target), d_model 256, 3+3 layers, 4 heads,
feed-forward 1024, post-norm (nn.Transformer's default), dropout 0.1, source
length 24, target length 25, batch 64, label smoothing 0.1, Adam
betas (0.9, 0.98) eps 1e-9.

Prints one line: `torch config=mt_toy_b64 threads=N ms_per_step=.. (median of R)`.
Run with Debian's python3-torch: /usr/bin/python3 bench/ref/mt_step.py --threads 2
"""
import argparse
import math
import time

import torch
import torch.nn as nn


class Translator(nn.Module):
    def __init__(self, vocab=1000, d=256, layers=3, heads=4, ff=1024, dropout=0.1):
        super().__init__()
        self.d = d
        self.src_emb = nn.Embedding(vocab, d, padding_idx=0)
        self.tgt_emb = nn.Embedding(vocab, d, padding_idx=0)
        self.core = nn.Transformer(d, heads, layers, layers, ff, dropout, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def positions(self, t):
        pos = torch.arange(t).unsqueeze(1)
        div = torch.exp(torch.arange(0, self.d, 2) * (-math.log(10000.0) / self.d))
        pe = torch.zeros(t, self.d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        return pe

    def forward(self, src, tgt_in):
        s = self.src_emb(src) * math.sqrt(self.d) + self.positions(src.shape[1])
        t = self.tgt_emb(tgt_in) * math.sqrt(self.d) + self.positions(tgt_in.shape[1])
        mask = self.core.generate_square_subsequent_mask(tgt_in.shape[1])
        h = self.core(s, t, tgt_mask=mask, src_key_padding_mask=src.eq(0),
                      tgt_key_padding_mask=tgt_in.eq(0), memory_key_padding_mask=src.eq(0))
        return self.out(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, S, T, V = 64, 24, 25, 1000
    model = Translator(V)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    src = torch.randint(4, V, (B, S))
    tgt = torch.randint(4, V, (B, T + 1))
    times = []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        logits = model(src, tgt[:, :-1])
        loss = loss_fn(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    print(f"torch config=mt_toy_b64 threads={args.threads} "
          f"ms_per_step={times[len(times) // 2]:.1f} (median of {len(times)})")


if __name__ == "__main__":
    main()
