#!/usr/bin/python3
"""Generates tests/ref/optim_fixtures.h and tests/ref/schedule_fixtures.h.

optim_fixtures.h: torch.optim parity on a 2-layer MLP,
    x (N, 6) -> linear(6 -> 8) -> tanh -> linear(8 -> 3) -> mse or cross-entropy
with float32 initial parameters, inputs and targets drawn here from a fixed
seed. Each case runs 20 steps of SGD / Adam / AdamW (torch.optim, PyTorch
1.13) in float64 starting from those float32 values, and records every
parameter after every step: the exact answer to ~1e-15, so the C test
measures ctrain's own float32 error. The header comment lists, for scale, how
far torch itself in float32 lands from that reference. Also: clip_grad_norm_
(in float64, on float32 gradients) and its clipped gradients.

schedule_fixtures.h: learning rates of torch's schedulers (StepLR,
CosineAnnealingLR, and LambdaLR with the lambdas that match ctrain's
schedules, see optim/schedule.h) at consecutive steps, plus the closed-form
formulas at scattered steps (beyond the end, large steps).

Run with Debian's python3 (torch 1.13) from the repository root:
    /usr/bin/python3 tests/ref/gen_optim_fixtures.py
The tests never run Python; the generated headers are committed.
"""
import math
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
N, IN, HID, OUT = 5, 6, 8, 3
STEPS = 20
PARAM_NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
PARAM_SHAPES = [(HID, IN), (HID,), (OUT, HID), (OUT,)]


# ---- C literals -------------------------------------------------------------

def c_float(v):
    """A float literal that reads back as exactly the float32 value v."""
    text = "%.9g" % v
    if not any(ch in text for ch in ".en"):
        text += ".0"
    return text + "f"


def c_double(v):
    """A double literal that reads back as exactly v."""
    text = "%.17g" % v
    if not any(ch in text for ch in ".en"):
        text += ".0"
    return text


def c_ref(v):
    # Nine significant digits: the reference to ~5e-10, far below the tests'
    # 1e-5 tolerance, at half the size of round-trip doubles.
    return "%.9g" % v


def wrap(items, width=78):
    out, line = [], "  "
    for item in items:
        piece = item + ","
        if len(line) + len(piece) + 1 > width:
            out.append(line.rstrip())
            line = "  "
        line += piece + " "
    out.append(line.rstrip())
    return "\n".join(out)


def c_array(ctype, name, items):
    return "static const %s %s[] = {\n%s\n};" % (ctype, name, wrap(items))


def f32(v):
    return torch.tensor(v, dtype=torch.float32).item()


# ---- optimizer parity -------------------------------------------------------

def make_data(seed):
    g = torch.Generator().manual_seed(seed)
    bound1, bound2 = 1 / math.sqrt(IN), 1 / math.sqrt(HID)  # nn.Linear's init
    params = [
        (torch.rand(HID, IN, generator=g) * 2 - 1) * bound1,
        (torch.rand(HID, generator=g) * 2 - 1) * bound1,
        (torch.rand(OUT, HID, generator=g) * 2 - 1) * bound2,
        (torch.rand(OUT, generator=g) * 2 - 1) * bound2,
    ]
    x = torch.randn(N, IN, generator=g)
    y = torch.randn(N, OUT, generator=g)
    labels = torch.randint(0, OUT, (N,), generator=g)
    return [p.float() for p in params], x.float(), y.float(), labels


def lr_list(kind, base):
    """Float32 LRs for the 20 steps (the C side passes floats)."""
    out = []
    for s in range(STEPS):
        if kind == "cosine":
            v = 0.5 * base * (1 + math.cos(math.pi * s / STEPS))
        elif kind == "warmup":
            v = base * min(1.0, (s + 1) / 5)
        else:
            v = base
        out.append(f32(v))
    return out


CASES = [
    dict(name="sgd_momentum", opt="sgd", loss="mse", lr=lr_list("const", 0.1),
         momentum=0.9),
    dict(name="sgd_nesterov_wd", opt="sgd", loss="ce",
         lr=lr_list("const", 0.05), momentum=0.9, nesterov=True,
         weight_decay=0.01),
    dict(name="sgd_dampening_wd_cosine_lr_frozen_fc1_bias", opt="sgd",
         loss="mse", lr=lr_list("cosine", 0.2), momentum=0.8, dampening=0.3,
         weight_decay=5e-3, frozen=[1]),
    dict(name="adam_wd", opt="adam", loss="mse", lr=lr_list("const", 0.01),
         weight_decay=0.01),
    dict(name="adamw_wd_no_decay_biases_warmup_lr", opt="adamw", loss="ce",
         lr=lr_list("warmup", 0.01), weight_decay=0.1, no_decay=[1, 3]),
    dict(name="adam_betas_eps_frozen_fc2_bias", opt="adam", loss="ce",
         lr=lr_list("const", 0.02), betas=(0.8, 0.99), eps=1e-6,
         frozen=[3]),
]


def defaults(case):
    d = dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0,
             betas=(0.9, 0.999), eps=1e-8, frozen=[], no_decay=[])
    if case["opt"] == "adamw":
        d["weight_decay"] = 0.01
    d.update(case)
    return d


def run_case(case, data, dtype):
    """Returns (losses, params after each step) from torch in `dtype`."""
    c = defaults(case)
    init, x, y, labels = data
    params = [p.to(dtype).clone().requires_grad_(i not in c["frozen"])
              for i, p in enumerate(init)]
    x, y = x.to(dtype), y.to(dtype)
    trainable = [i for i in range(4) if i not in c["frozen"]]
    decay = [params[i] for i in trainable if i not in c["no_decay"]]
    nodecay = [params[i] for i in trainable if i in c["no_decay"]]
    groups = [{"params": decay}]
    if nodecay:
        groups.append({"params": nodecay, "weight_decay": 0.0})
    lr0 = c["lr"][0]
    if c["opt"] == "sgd":
        opt = torch.optim.SGD(groups, lr=lr0, momentum=c["momentum"],
                              dampening=c["dampening"],
                              nesterov=c["nesterov"],
                              weight_decay=c["weight_decay"])
    else:
        cls = torch.optim.Adam if c["opt"] == "adam" else torch.optim.AdamW
        opt = cls(groups, lr=lr0, betas=c["betas"], eps=c["eps"],
                  weight_decay=c["weight_decay"])
    losses, history = [], []
    for s in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = c["lr"][s]
        opt.zero_grad()
        out = F.linear(torch.tanh(F.linear(x, params[0], params[1])),
                       params[2], params[3])
        loss = F.mse_loss(out, y) if c["loss"] == "mse" else \
            F.cross_entropy(out, labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        history.append(torch.cat([p.detach().flatten() for p in params])
                       .to(torch.float64))
    return losses, history


VEC_SHAPES = [(5, 8), (8,)]  # "w" (decayed) and "b" (NO_DECAY)
VEC_STEPS = 3


def vec_data():
    g = torch.Generator().manual_seed(99)
    init = [(torch.rand(*s, generator=g) * 2 - 1).float() for s in VEC_SHAPES]
    grads = [[(torch.randn(*s, generator=g) * 0.5).float() for s in VEC_SHAPES]
             for _ in range(VEC_STEPS)]
    return init, grads


def run_vec(case, vec, dtype=torch.float64):
    """The optimizer alone, in float64: VEC_STEPS steps of the case's
    optimizer on two tensors with given float32 gradients, the second one
    without weight decay. Returns the values after each step."""
    c = defaults(case)
    init, grads = vec
    ps = [t.to(dtype).clone().requires_grad_(True) for t in init]
    groups = [{"params": [ps[0]]}, {"params": [ps[1]], "weight_decay": 0.0}]
    if c["opt"] == "sgd":
        opt = torch.optim.SGD(groups, lr=c["lr"][0], momentum=c["momentum"],
                              dampening=c["dampening"],
                              nesterov=c["nesterov"],
                              weight_decay=c["weight_decay"])
    else:
        cls = torch.optim.Adam if c["opt"] == "adam" else torch.optim.AdamW
        opt = cls(groups, lr=c["lr"][0], betas=c["betas"], eps=c["eps"],
                  weight_decay=c["weight_decay"])
    out = []
    for s in range(VEC_STEPS):
        for grp in opt.param_groups:
            grp["lr"] = c["lr"][s]
        for p, g in zip(ps, grads[s]):
            p.grad = g.to(dtype).clone()
        opt.step()
        out.append(torch.cat([p.detach().flatten() for p in ps])
                   .to(torch.float64))
    return out


def param_errors(got, ref, shapes):
    """Worst error of `got` vs `ref` over all steps, with the floors of
    tests/test_optim.c: |d| / max(|ref|, f * max|ref| of the tensor) for
    f = 0.1 (the tested one) and 0.01, and |d| / max(|ref|, 1e-6)."""
    sizes = [math.prod(s) for s in shapes]
    worst = [0.0, 0.0, 0.0]
    for a, b in zip(got, ref):
        for x, y in zip(a.split(sizes), b.split(sizes)):
            d, scale = (x - y).abs(), y.abs().max()
            for k, floor in enumerate([0.1 * scale, 0.01 * scale, 1e-6]):
                e = (d / y.abs().clamp(min=floor)).max().item()
                worst[k] = max(worst[k], e)
    return worst


def optim_header(data):
    init, x, y, labels = data
    results = []
    vec = vec_data()
    for case in CASES:
        losses, ref = run_case(case, data, torch.float64)
        _, ref32 = run_case(case, data, torch.float32)
        rel = param_errors(ref32, ref, PARAM_SHAPES)
        rel += param_errors(run_vec(case, vec, torch.float32),
                            run_vec(case, vec, torch.float64), VEC_SHAPES)
        results.append((case, losses, ref, rel))
    clip = clip_cases()

    L = []
    L.append("// Generated by tests/ref/gen_optim_fixtures.py with torch %s; "
             "do not edit." % torch.__version__)
    L.append("// torch.optim in float64 from float32 initial values: every "
             "parameter after")
    L.append("// every step. For scale, torch in float32 differs from it by "
             "|d| / max(|ref|, floor),")
    L.append("// floor = 0.1 or 0.01 times the tensor's max |ref|, or 1e-6 "
             "(see tests/test_optim.c),")
    L.append("// on the model, then for the optimizer alone:")
    for case, _, _, rel in results:
        L.append("//   %-42s %.1e %.1e %.1e  %.1e %.1e %.1e"
                 % (case["name"], *rel))
    L += ["#ifndef CT_TESTS_REF_OPTIM_FIXTURES_H",
          "#define CT_TESTS_REF_OPTIM_FIXTURES_H",
          "", "#include <stdbool.h>", "#include <stdint.h>", ""]
    L.append("enum { OPTIM_N = %d, OPTIM_IN = %d, OPTIM_HID = %d, "
             "OPTIM_OUT = %d, OPTIM_STEPS = %d," % (N, IN, HID, OUT, STEPS))
    L.append("       OPTIM_PARAMS = 4, OPTIM_NUMEL = %d };"
             % sum(p.numel() for p in init))
    L.append("// Parameter i in registry order, each flattened row-major; "
             "the reference rows")
    L.append("// concatenate them in this order.")
    L.append("static const char *const optim_param_names[OPTIM_PARAMS] = {%s};"
             % ", ".join('"%s"' % n for n in PARAM_NAMES))
    L.append(c_array("float", "optim_init",
                     [c_float(v) for p in init for v in p.flatten().tolist()]))
    L.append(c_array("float", "optim_x", [c_float(v) for v in
                                          x.flatten().tolist()]))
    L.append("// mse targets (N, OUT) and cross-entropy labels (N)")
    L.append(c_array("float", "optim_y", [c_float(v) for v in
                                          y.flatten().tolist()]))
    L.append(c_array("int32_t", "optim_labels",
                     [str(v) for v in labels.tolist()]))
    L.append("")
    L.append("typedef struct optim_fixture {")
    L.append("  const char *name;")
    L.append("  const char *optimizer;      // sgd, adam, adamw")
    L.append("  bool cross_entropy;         // else mse")
    L.append("  double momentum, dampening, weight_decay, beta1, beta2, eps;")
    L.append("  bool nesterov;")
    L.append("  unsigned frozen, no_decay;  // bit i: parameter i")
    L.append("  const float *lr;            // (OPTIM_STEPS)")
    L.append("  const double *loss;         // (OPTIM_STEPS) before each step")
    L.append("  const double *params;       // (OPTIM_STEPS, OPTIM_NUMEL) "
             "after each step")
    L.append("  const double *vec_params;   // (OPTIM_VEC_STEPS, "
             "OPTIM_VEC_NUMEL) after each step")
    L.append("} optim_fixture;")
    L.append("")
    L.append("// The optimizer alone: OPTIM_VEC_STEPS steps of each case's "
             "optimizer on a store")
    L.append("// of \"w\" (5, 8) and \"b\" (8) (NO_DECAY) with these "
             "float32 gradients.")
    L.append("enum { OPTIM_VEC_STEPS = %d, OPTIM_VEC_W = %d, OPTIM_VEC_B = %d, "
             "OPTIM_VEC_NUMEL = %d };" % (VEC_STEPS, 40, 8, 48))
    L.append(c_array("float", "optim_vec_init",
                     [c_float(v) for t in vec[0]
                      for v in t.flatten().tolist()]))
    L.append(c_array("float", "optim_vec_grad",
                     [c_float(v) for step in vec[1] for t in step
                      for v in t.flatten().tolist()]))
    L.append("")
    for i, (case, losses, ref, _) in enumerate(results):
        L.append(c_array("double", "optim_vec_ref_%d" % i,
                         [c_ref(v) for r in run_vec(case, vec)
                          for v in r.tolist()]))
        L.append(c_array("float", "optim_lr_%d" % i,
                         [c_float(v) for v in case["lr"]]))
        L.append(c_array("double", "optim_loss_%d" % i,
                         [c_ref(v) for v in losses]))
        L.append(c_array("double", "optim_ref_%d" % i,
                         [c_ref(v) for r in ref for v in r.tolist()]))
        L.append("")
    L.append("static const optim_fixture optim_fixtures[] = {")
    for i, (case, _, _, _) in enumerate(results):
        c = defaults(case)
        bits = lambda idx: sum(1 << j for j in idx)
        L.append('  {"%s", "%s", %s, %s, %s, %s, %s, %s, %s, %s, %u, %u,'
                 % (c["name"], c["opt"], "true" if c["loss"] == "ce" else
                    "false", c_double(c["momentum"]), c_double(c["dampening"]),
                    c_double(c["weight_decay"]), c_double(c["betas"][0]),
                    c_double(c["betas"][1]), c_double(c["eps"]),
                    "true" if c["nesterov"] else "false", bits(c["frozen"]),
                    bits(c["no_decay"])))
        L.append("   optim_lr_%d, optim_loss_%d, optim_ref_%d, "
                 "optim_vec_ref_%d}," % (i, i, i, i))
    L.append("};")
    L.append("static const int optim_fixture_count = "
             "(int)(sizeof optim_fixtures / sizeof optim_fixtures[0]);")
    L.append("")
    L += clip
    L += ["", "#endif"]
    return L


def clip_cases():
    """clip_grad_norm_ on float32 gradients for the MLP's parameters, in
    float64: the norm and the clipped gradients."""
    g = torch.Generator().manual_seed(77)
    grads = [(torch.randn(*s, generator=g) * 0.7).float() for s in PARAM_SHAPES]
    cases = [("clips", 1.0, []), ("below_max_norm", 100.0, []),
             ("clips_frozen_fc1_weight", 0.5, [0])]
    L = ["// clip_grad_norm_(non-frozen params, max_norm) in float64 on the "
         "float32 gradients",
         "// optim_clip_grad (OPTIM_NUMEL, layout as above).",
         c_array("float", "optim_clip_grad",
                 [c_float(v) for t in grads for v in t.flatten().tolist()]),
         "typedef struct clip_fixture {",
         "  const char *name;",
         "  double max_norm;",
         "  unsigned frozen;        // bit i: parameter i",
         "  double norm;            // returned total norm",
         "  const double *clipped;  // (OPTIM_NUMEL); frozen ones unchanged",
         "} clip_fixture;"]
    rows = []
    for i, (name, max_norm, frozen) in enumerate(cases):
        ps = []
        for j, t in enumerate(grads):
            p = torch.zeros(t.shape, dtype=torch.float64,
                            requires_grad=j not in frozen)
            p.grad = t.to(torch.float64).clone()
            ps.append(p)
        norm = torch.nn.utils.clip_grad_norm_(
            [p for j, p in enumerate(ps) if j not in frozen], max_norm).item()
        L.append(c_array("double", "optim_clipped_%d" % i,
                         [c_ref(v) for p in ps for v in
                          p.grad.flatten().tolist()]))
        rows.append('  {"%s", %s, %u, %s, optim_clipped_%d},'
                    % (name, c_double(max_norm), sum(1 << j for j in frozen),
                       c_double(norm), i))
    L.append("static const clip_fixture clip_fixtures[] = {")
    L += rows
    L.append("};")
    L.append("static const int clip_fixture_count = "
             "(int)(sizeof clip_fixtures / sizeof clip_fixtures[0]);")
    return L


# ---- schedules --------------------------------------------------------------

def torch_lrs(make_sched, lr, steps):
    """LR of update s = 0..steps-1 from a torch scheduler (set before each
    optimizer.step(), advanced after it)."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=lr)
    sched = make_sched(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def formula(c, s):
    """ctrain's closed forms (optim/schedule.h), in double."""
    k, lr, w = c["kind"], c["lr"], c.get("warmup", 0)
    if k == "inverse_sqrt":
        n = s + 1
        return lr * c["d_model"] ** -0.5 * min(n ** -0.5, n * w ** -1.5)
    if s < w:
        return lr * s / w
    if k in ("cosine", "linear"):
        q = min(1.0, max(0.0, (s - w) / (c["total"] - w)))
        lo = c.get("min_lr", 0.0)
        if k == "cosine":
            return lo + (lr - lo) * 0.5 * (1 + math.cos(math.pi * q))
        return lr + (lo - lr) * q
    if k == "step":
        return lr * c["gamma"] ** (s // c["step_size"])
    return lr


def lambda_for(c):
    """The LambdaLR multiplier equal to ctrain's schedule (base lr = c.lr)."""
    return lambda s: formula(c, s) / c["lr"]


SCHEDULES = [
    # (case, torch source, steps from torch, scattered formula steps)
    (dict(name="constant", kind="constant", lr=3e-4), "LambdaLR", 30,
     [0, 1, 1000, 10 ** 9]),
    (dict(name="constant_warmup", kind="constant", lr=3e-4, warmup=10),
     "LambdaLR", 30, [0, 5, 10, 10 ** 6]),
    (dict(name="cosine_pure", kind="cosine", lr=0.1, total=40),
     "CosineAnnealingLR", 41, [40, 41, 100, 10 ** 7]),
    (dict(name="cosine_pure_min_lr", kind="cosine", lr=0.1, min_lr=1e-3,
          total=25), "CosineAnnealingLR", 26, [25, 26, 1000]),
    (dict(name="cosine_warmup_min_lr", kind="cosine", lr=1e-3, min_lr=1e-5,
          warmup=8, total=50), "LambdaLR", 60, [0, 7, 8, 29, 50, 51, 10 ** 6]),
    (dict(name="linear_warmup", kind="linear", lr=5e-4, warmup=4, total=30),
     "LambdaLR", 40, [0, 3, 4, 17, 30, 31, 99999]),
    (dict(name="linear_warmup_min_lr", kind="linear", lr=5e-4, min_lr=5e-5,
          warmup=3, total=20), "LambdaLR", 25, [19, 20, 21]),
    (dict(name="inverse_sqrt", kind="inverse_sqrt", lr=2.0, d_model=512,
          warmup=40), "LambdaLR", 100, [0, 38, 39, 40, 4000, 10 ** 8]),
    (dict(name="inverse_sqrt_warmup_1", kind="inverse_sqrt", lr=1.0, d_model=1,
          warmup=1), "LambdaLR", 10, [0, 1, 99]),
    (dict(name="step", kind="step", lr=0.1, step_size=7, gamma=0.5), "StepLR",
     40, [0, 6, 7, 13, 14, 700]),
    (dict(name="step_warmup", kind="step", lr=0.1, step_size=10, gamma=0.1,
          warmup=5), "LambdaLR", 35, [0, 4, 5, 9, 10, 20]),
]


def schedule_header():
    L = ["// Generated by tests/ref/gen_optim_fixtures.py with torch %s; "
         "do not edit." % torch.__version__,
         "// Learning rates of torch schedulers at steps 0..n_torch-1 "
         "(see optim/schedule.h",
         "// for the step numbering), and ctrain's closed-form formulas "
         "(in double) at",
         "// scattered steps.",
         "#ifndef CT_TESTS_REF_SCHEDULE_FIXTURES_H",
         "#define CT_TESTS_REF_SCHEDULE_FIXTURES_H", "", "#include <stdint.h>", "",
         "typedef struct schedule_fixture {",
         "  const char *name;",
         "  const char *kind;         // ct_schedule_kind_name",
         "  double lr, min_lr, gamma;",
         "  int64_t warmup, total, d_model, step_size;",
         "  const char *torch;        // the torch scheduler behind torch_lr",
         "  int n_torch;",
         "  const double *torch_lr;   // (n_torch): steps 0..n_torch-1",
         "  int n_formula;",
         "  const int64_t *formula_step;",
         "  const double *formula_lr;",
         "} schedule_fixture;", ""]
    rows = []
    for i, (c, source, n_torch, steps) in enumerate(SCHEDULES):
        if source == "StepLR":
            make = lambda o, c=c: torch.optim.lr_scheduler.StepLR(
                o, step_size=c["step_size"], gamma=c["gamma"])
        elif source == "CosineAnnealingLR":
            make = lambda o, c=c: torch.optim.lr_scheduler.CosineAnnealingLR(
                o, T_max=c["total"], eta_min=c.get("min_lr", 0.0))
        else:
            make = lambda o, c=c: torch.optim.lr_scheduler.LambdaLR(
                o, lambda_for(c))
        got = torch_lrs(make, c["lr"], n_torch)
        # The lambdas must be the closed forms: guard against a typo here.
        for s, v in enumerate(got):
            assert abs(v - formula(c, s)) <= 1e-12 * c["lr"], (c["name"], s)
        L.append(c_array("double", "sched_torch_%d" % i,
                         [c_double(v) for v in got]))
        L.append(c_array("int64_t", "sched_step_%d" % i,
                         [str(s) for s in steps]))
        L.append(c_array("double", "sched_formula_%d" % i,
                         [c_double(formula(c, s)) for s in steps]))
        rows.append('  {"%s", "%s", %s, %s, %s, %d, %d, %d, %d, "%s", %d, '
                    "sched_torch_%d, %d, sched_step_%d, sched_formula_%d},"
                    % (c["name"], c["kind"], c_double(c["lr"]),
                       c_double(c.get("min_lr", 0.0)),
                       c_double(c.get("gamma", 0.0)), c.get("warmup", 0),
                       c.get("total", 0), c.get("d_model", 0),
                       c.get("step_size", 0), source, n_torch, i, len(steps),
                       i, i))
    L.append("")
    L.append("static const schedule_fixture schedule_fixtures[] = {")
    L += rows
    L.append("};")
    L.append("static const int schedule_fixture_count = "
             "(int)(sizeof schedule_fixtures / sizeof schedule_fixtures[0]);")
    L += ["", "#endif"]
    return L


def write(name, lines):
    path = os.path.join(HERE, name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d bytes)" % (path, os.path.getsize(path)))


def main():
    write("optim_fixtures.h", optim_header(make_data(2024)))
    write("schedule_fixtures.h", schedule_header())


if __name__ == "__main__":
    main()
