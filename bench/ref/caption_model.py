"""The captioner of nn/captioner.c in plain PyTorch: "Show, Attend and Tell"
(Xu et al. 2015), soft attention, laid out as the well-known PyTorch
reimplementation (sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning) with its
parameter names, plus the paper's deep output layer (eq. 7), so ctrain's
export loads with load_state_dict(strict=True) and back:

  encoder.*                             nn/resnet.h's CIFAR-style ResNet with
                                        torchvision's names, no fc
  decoder.attention.encoder_att (A,D)   W_a a_i + b_a
  decoder.attention.decoder_att (A,H)   W_h h + b_h
  decoder.attention.full_att.weight (1,A), no bias (it would shift every
                                        score alike: no effect on alpha)
  decoder.embedding.weight (V,E)
  decoder.decode_step.*                 nn.LSTMCell(E+D, H)
  decoder.init_h, decoder.init_c        Linear(D, H)
  decoder.f_beta                        Linear(H, D)
  decoder.L_h (E,H), decoder.L_z (E,D)  no bias
  decoder.L_o                           Linear(E, V)

The computation: annotations a (B,L,D) = the last feature map flattened
over its positions; h_0 = init_h(mean a), c_0 = init_c(mean a); per step
t with input token y_t (teacher-forced: <bos> then the caption):
  alpha = softmax_i(full_att(tanh(encoder_att(a_i) + decoder_att(h))))
  z = sigmoid(f_beta(h)) * sum_i alpha_i a_i
  h, c = decode_step([emb(y_t); z], (h, c))
  logits_t = L_o(dropout(emb(y_t) + L_h(h) + L_z(z)))
The doubly stochastic regularization: lambda / B * sum_{b,i} (1 - sum_t
mask_bt alpha_bti)^2. Unlike the tutorial, every row runs all T steps
(no sort by length; padding steps are masked out of the losses) and the
keys encoder_att(a) are projected once per batch (the same function).
Init is PyTorch's own (torchvision's kaiming_normal fan_out for convs).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False),
                nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.downsample is None
                           else self.downsample(x)))


class Encoder(nn.Module):
    """nn/resnet.h's features: 3x3 stem, no max pool, `stages` stages of
    `blocks` BasicBlocks, widths width * 2^s, stride 2 from stage 2."""

    def __init__(self, in_channels, width, stages, blocks):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        cin = width
        for s in range(stages):
            cout = width << s
            layer = [BasicBlock(cin if j == 0 else cout, cout,
                                2 if s > 0 and j == 0 else 1)
                     for j in range(blocks)]
            setattr(self, "layer%d" % (s + 1), nn.Sequential(*layer))
            cin = cout
        self.stages = stages
        self.channels = cin
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out",
                                        nonlinearity="relu")

    def forward(self, x):  # (B,C,H,W) -> annotations (B,h*w,D)
        y = F.relu(self.bn1(self.conv1(x)))
        for s in range(self.stages):
            y = getattr(self, "layer%d" % (s + 1))(y)
        return y.flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, D, H, A):
        super().__init__()
        self.encoder_att = nn.Linear(D, A)
        self.decoder_att = nn.Linear(H, A)
        self.full_att = nn.Linear(A, 1, bias=False)

    def forward(self, keys, a, h):  # -> context (B,D), alpha (B,L)
        score = self.full_att(
            torch.tanh(keys + self.decoder_att(h).unsqueeze(1))).squeeze(2)
        alpha = F.softmax(score, dim=1)
        return (alpha.unsqueeze(2) * a).sum(1), alpha


class Decoder(nn.Module):
    def __init__(self, V, E, H, A, D, dropout):
        super().__init__()
        self.attention = Attention(D, H, A)
        self.embedding = nn.Embedding(V, E)
        self.dropout = nn.Dropout(dropout)
        self.decode_step = nn.LSTMCell(E + D, H)
        self.init_h = nn.Linear(D, H)
        self.init_c = nn.Linear(D, H)
        self.f_beta = nn.Linear(H, D)
        self.L_h = nn.Linear(H, E, bias=False)
        self.L_z = nn.Linear(D, E, bias=False)
        self.L_o = nn.Linear(E, V)

    def forward(self, a, tokens):  # -> logits (B,T,V), alphas (B,T,L)
        mean = a.mean(1)
        h, c = self.init_h(mean), self.init_c(mean)
        keys = self.attention.encoder_att(a)
        emb = self.embedding(tokens)
        hs, zs, alphas = [], [], []
        for t in range(tokens.shape[1]):
            ctx, alpha = self.attention(keys, a, h)
            z = torch.sigmoid(self.f_beta(h)) * ctx
            h, c = self.decode_step(torch.cat([emb[:, t], z], dim=1), (h, c))
            hs.append(h)
            zs.append(z)
            alphas.append(alpha)
        pre = emb + self.L_h(torch.stack(hs, 1)) + self.L_z(torch.stack(zs, 1))
        return self.L_o(self.dropout(pre)), torch.stack(alphas, 1)


class Captioner(nn.Module):
    def __init__(self, in_channels, width, stages, blocks, V, E, H, A,
                 dropout):
        super().__init__()
        self.encoder = Encoder(in_channels, width, stages, blocks)
        self.decoder = Decoder(V, E, H, A, self.encoder.channels, dropout)

    def forward(self, images, tokens):
        return self.decoder(self.encoder(images), tokens)


def attention_reg(alphas, mask, lam):
    """lambda / B * sum_{b,i} (1 - sum_t mask_bt alpha_bti)^2"""
    s = (alphas * mask.unsqueeze(2).to(alphas.dtype)).sum(1)
    return lam * ((1 - s) ** 2).sum() / alphas.shape[0]
