"""The RNN translator of nn/rnn_seq2seq.c in plain PyTorch: the attention
GRU of "Neural Machine Translation by Jointly Learning to Align and
Translate" (Bahdanau, Cho & Bengio 2015) as the well-known PyTorch tutorial
builds it (bentrevett/pytorch-seq2seq, notebooks 3 and 4: the encoder's
final states through a tanh layer, padding masked in the attention), with
the tutorial's parameter names, so ctrain's export loads with
load_state_dict(strict=True) and this state_dict loads into ctrain:

  encoder.embedding.weight (Vs,E)          token 0 is padding
  encoder.rnn.*                            nn.GRU(E, He, bidirectional)
  encoder.fc.weight (Hd,2He), .bias
  decoder.attention.attn.weight (Hd, Hd+2He), .bias
  decoder.attention.v.weight (1,Hd)
  decoder.embedding.weight (Vt,E)
  decoder.rnn.*                            nn.GRU(E+2He, Hd)
  decoder.fc_out.weight (Vt, Hd+2He+E), .bias

The computation, batch first, src (B,S) and tgt_in (B,T) token ids with
padding (0) trailing:
  encoder: e = dropout(emb(src)); the GRU over the packed sequences
    (lengths = the non-padding count); h0 = tanh(fc([h_fwd; h_bwd]))
  attention (once per step, with the previous state s): score_j =
    v . tanh(W_q s + W_k h_j + b), [W_q W_k] = attn.weight (the tutorial's
    Linear over cat(s, h_j)), padding -inf, softmax; context = sum a_j h_j
  decoder step: s' = GRU([dropout(emb(y)); context], s); the step's
    features [s'; context; dropout(emb(y))], and after the loop
    logits = fc_out over all steps at once.
Teacher forcing (training only): step t > 0 is fed tgt_in[:, t], or, with
probability 1 - teacher_forcing, the argmax of the previous step's logits
(decided per step for the whole batch, as the tutorial).

The keys W_k h_j + b are projected once per sentence rather than the
tutorial's Linear over cat(s, h_j) at every step: the same function, the
cost a CPU implementation would choose. Init is PyTorch's own (N(0,1)
embeddings with a zero padding row, nn.GRU's U(+-1/sqrt(H)), nn.Linear's
rule). Not here: beam search (train/decode.c).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Encoder(nn.Module):
    def __init__(self, vocab, emb, enc_hid, dec_hid, dropout):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb, padding_idx=0)
        self.rnn = nn.GRU(emb, enc_hid, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(enc_hid * 2, dec_hid)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src, lengths):  # -> outputs (B,S,2He), hidden (B,Hd)
        e = self.dropout(self.embedding(src))
        packed = pack_padded_sequence(e, lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, h = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True,
                                     total_length=src.shape[1])
        return out, torch.tanh(self.fc(torch.cat((h[-2], h[-1]), dim=1)))


class Attention(nn.Module):
    def __init__(self, enc_hid, dec_hid):
        super().__init__()
        self.dec_hid = dec_hid
        self.attn = nn.Linear(enc_hid * 2 + dec_hid, dec_hid)
        self.v = nn.Linear(dec_hid, 1, bias=False)

    def keys(self, enc_out):  # (B,S,2He) -> W_k h + b (B,S,Hd)
        return F.linear(enc_out, self.attn.weight[:, self.dec_hid:],
                        self.attn.bias)

    def forward(self, s, keys, mask):  # -> weights (B,S)
        q = F.linear(s, self.attn.weight[:, :self.dec_hid])
        score = self.v(torch.tanh(q.unsqueeze(1) + keys)).squeeze(2)
        return F.softmax(score.masked_fill(mask, float("-inf")), dim=1)


class Decoder(nn.Module):
    def __init__(self, vocab, emb, enc_hid, dec_hid, dropout):
        super().__init__()
        self.attention = Attention(enc_hid, dec_hid)
        self.embedding = nn.Embedding(vocab, emb, padding_idx=0)
        self.rnn = nn.GRU(enc_hid * 2 + emb, dec_hid)
        self.fc_out = nn.Linear(enc_hid * 2 + dec_hid + emb, vocab)
        self.dropout = nn.Dropout(dropout)

    def step(self, e, s, keys, enc_out, mask):
        """e (B,E) the dropped-out embedding, s (B,Hd) -> the new state, the
        step's features (B, Hd+2He+E) and the attention weights (B,S)."""
        a = self.attention(s, keys, mask)
        ctx = torch.bmm(a.unsqueeze(1), enc_out).squeeze(1)
        _, h = self.rnn(torch.cat((e, ctx), dim=1).unsqueeze(0),
                        s.unsqueeze(0))
        s = h.squeeze(0)
        return s, torch.cat((s, ctx, e), dim=1), a


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, emb=256, enc_hid=512,
                 dec_hid=512, dropout=0.5):
        super().__init__()
        self.encoder = Encoder(src_vocab, emb, enc_hid, dec_hid, dropout)
        self.decoder = Decoder(tgt_vocab, emb, enc_hid, dec_hid, dropout)

    def forward(self, src, tgt_in, teacher_forcing=1.0, rng=None):
        """(B,S), (B,T) -> logits (B,T,Vt). rng (a random.Random) draws the
        teacher-forcing coins; only used when teacher_forcing < 1."""
        mask = src.eq(0)
        enc_out, s = self.encoder(src, (~mask).sum(1))
        dec = self.decoder
        keys = dec.attention.keys(enc_out)
        forced = dec.dropout(dec.embedding(tgt_in))
        feats, e = [], forced[:, 0]
        for t in range(tgt_in.shape[1]):
            s, f, _ = dec.step(e, s, keys, enc_out, mask)
            feats.append(f)
            if t + 1 == tgt_in.shape[1]:
                break
            if teacher_forcing >= 1.0 or rng.random() < teacher_forcing:
                e = forced[:, t + 1]
            else:
                with torch.no_grad():
                    top = dec.fc_out(f).argmax(1)
                e = dec.dropout(dec.embedding(top))
        return dec.fc_out(torch.stack(feats, dim=1))
