#!/usr/bin/env python3
"""Cross-checks ctrain's .safetensors files against PyTorch (optional; the
C tests never need Python).

  check_safetensors.py write OUT.safetensors   # a file for ctrain to load
  check_safetensors.py read IN.safetensors     # check a file ctrain wrote

Both sides use the same reference tensors: REFERENCE maps a name to a shape,
and a tensor's values are arange(numel) * 0.25 - 1 in row-major order, cast
to the file's dtype. `write` stores them (F32, plus an F16 and a BF16 copy
under "*.f16" / "*.bf16" names that ctrain converts to f32); `read` checks
that every tensor in the file has those values and prints the largest
difference.

With the `safetensors` package installed, it is used for both directions.
Without it (the usual case here), the format is written and read by the
minimal code below, which follows the spec: u64 little-endian header length
N, N bytes of JSON (space-padded to a multiple of 8), then the packed data.
"""
import json
import struct
import sys

import torch

REFERENCE = {
    "blocks.0.attn.qkv.weight": (12, 4),
    "blocks.0.attn.qkv.bias": (12,),
    "cls_token": (1, 1, 4),
    "head.weight": (3, 4),
    "temperature": (),
}
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "F64": torch.float64}


def reference(shape, dtype=torch.float32):
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(n, dtype=torch.float64) * 0.25 - 1).reshape(shape).to(dtype)


def save(tensors, path, metadata=None):
    try:
        from safetensors.torch import save_file
        save_file(tensors, path, metadata=metadata)
        return
    except ImportError:
        pass
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    names = {v: k for k, v in DTYPES.items()}
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        # Raw little-endian bytes (view as bytes works for bf16 too).
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load(path):
    try:
        from safetensors.torch import load_file
        return load_file(path)
    except ImportError:
        pass
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, f"header length {n} is not a multiple of 8"
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    spans = sorted(tuple(v["data_offsets"]) for v in header.values())
    at = 0
    for begin, end in spans:
        assert begin == at, f"gap or overlap at byte {begin}"
        at = end
    assert at == len(body), f"{len(body) - at} trailing data bytes"
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        raw = bytearray(body[begin:end])
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"])
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "read"):
        sys.exit(__doc__)
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write":
        tensors = {name: reference(shape) for name, shape in REFERENCE.items()}
        tensors["head.weight.f16"] = reference(REFERENCE["head.weight"], torch.float16)
        tensors["head.weight.bf16"] = reference(REFERENCE["head.weight"], torch.bfloat16)
        save(tensors, path, {"format": "pt"})
        print(f"wrote {len(tensors)} tensors to {path}")
        return
    tensors = load(path)
    worst = 0.0
    for name, t in sorted(tensors.items()):
        base = name.rsplit(".", 1)[0] if name.endswith((".f16", ".bf16")) else name
        if base not in REFERENCE:
            sys.exit(f"{path}: unexpected tensor {name!r}")
        want = reference(REFERENCE[base])
        if tuple(t.shape) != tuple(want.shape):
            sys.exit(f"{path}: {name!r} has shape {list(t.shape)}, want {list(want.shape)}")
        diff = (t.double() - want.double()).abs().max().item() if t.numel() else 0.0
        worst = max(worst, diff)
        print(f"{name:32s} {str(list(t.shape)):12s} {str(t.dtype):14s} max |diff| {diff:.3g}")
    print(f"max |diff| over {len(tensors)} tensors: {worst:.3g}")
    sys.exit(0 if worst == 0 else 1)


if __name__ == "__main__":
    main()
