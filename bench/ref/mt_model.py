"""The encoder-decoder translator of nn/seq2seq.c in plain PyTorch, with
ctrain's parameter names, so ctrain's export loads with
load_state_dict(strict=True) and the twin's state_dict loads into ctrain
(`ctrain forward --weights`, [model] init_from):

  src_emb.weight (Vs,E), tgt_emb.weight (Vt,E)   token 0 is padding
  transformer.*                                  nn.Transformer, batch_first
  generator.weight (Vt,E)                        only when not tied
  generator.bias (Vt)

The computation: embeddings scaled by sqrt(E) plus sinusoidal positions
(sin on even, cos on odd channels, angle pos / 10000^(2i/E)), then dropout;
nn.Transformer with final norms on both stacks; source padding masked in
the encoder and the cross-attention (key padding from id 0); a causal
decoder with no target padding mask (padding follows the last real token,
so the causal mask already hides it from every real query); logits =
h W^T + b with W the target embedding when tied (Press & Wolf 2017).

Init is PyTorch's own (N(0,1) embeddings with a zero padding row,
nn.Transformer's xavier matrices, nn.Linear's rule for the generator), not
ctrain's; the checks that use this twin load weights, they never compare
inits.
Not here: incremental decoding, beam search (train/decode.c).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def sinusoidal_positions(t, d):
    """(t, d) table: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] =
    cos of the same angle (nn/position.c)."""
    pos = torch.arange(t).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(t, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class Generator(nn.Module):
    """h (B,T,E) -> h W^T + bias (B,T,V). Tied, W is the target embedding,
    passed in, so the state_dict holds only generator.bias, as ctrain's."""

    def __init__(self, d, vocab, tied):
        super().__init__()
        if tied:
            self.register_parameter("weight", None)
        else:
            self.weight = nn.Parameter(torch.empty(vocab, d))
            nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        # nn.Linear's bias rule: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        self.bias = nn.Parameter(torch.empty(vocab))
        nn.init.uniform_(self.bias, -1 / math.sqrt(d), 1 / math.sqrt(d))

    def forward(self, h, tied_weight):
        w = tied_weight if self.weight is None else self.weight
        return F.linear(h, w, self.bias)


class Translator(nn.Module):
    def __init__(self, vocab, d, layers, heads, ff, dropout=0.1, *,
                 tgt_vocab=None, decoder_layers=None, activation="relu",
                 norm_first=False, tie_output=True):
        super().__init__()
        tgt_vocab = vocab if tgt_vocab is None else tgt_vocab
        decoder_layers = layers if decoder_layers is None else decoder_layers
        self.d = d
        self.src_emb = nn.Embedding(vocab, d, padding_idx=0)
        self.tgt_emb = nn.Embedding(tgt_vocab, d, padding_idx=0)
        self.transformer = nn.Transformer(d, heads, layers, decoder_layers, ff,
                                          dropout, activation=activation,
                                          batch_first=True,
                                          norm_first=norm_first)
        self.generator = Generator(d, tgt_vocab, tie_output)
        self.dropout = nn.Dropout(dropout)

    def embed(self, emb, ids):  # ids (B,T) -> (B,T,E)
        x = emb(ids) * math.sqrt(self.d)
        return self.dropout(x + sinusoidal_positions(ids.shape[1], self.d))

    def forward(self, src, tgt_in):  # (B,S), (B,T) -> logits (B,T,Vt)
        mask = self.transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        src_pad = src.eq(0)
        h = self.transformer(self.embed(self.src_emb, src),
                             self.embed(self.tgt_emb, tgt_in), tgt_mask=mask,
                             src_key_padding_mask=src_pad,
                             memory_key_padding_mask=src_pad)
        return self.generator(h, self.tgt_emb.weight)
