"""Equal-work PyTorch reference for the project's transformer training step.

The model
---------
The character-level language model `CharLm` of `examples/transformer/src/model.rs`, timed as
`benches/src/workloads.rs` times it (`transformer_step` + `adam_step`, `TransformerSize::DESIGN`):

  tokens [batch, seq] (uniform in [0, vocab))
  -> token Embedding(vocab, d_model) + position Embedding(seq, d_model)
  -> `burn::nn::transformer::TransformerEncoder` with `norm_first = true`, under the causal mask of
     `burn::nn::attention::generate_autoregressive_mask`; `layers` layers, each:
         r = norm_2(x); r = MultiHeadAttention(r); r = dropout(r); x = x + r
         r = norm_1(x); r = PositionWiseFeedForward(r); r = dropout(r); x = x + r
     MultiHeadAttention (`burn::nn::attention::MultiHeadAttention`): separate query/key/value/
     output Linear layers with bias; scores = (q k^T) / sqrt(d_head); scores = dropout(scores)
     (Burn drops out the raw *scores*, before the mask and the softmax); masked scores are
     filled with `min_float`; softmax over the last dim (quiet_softmax off); weights v; output.
     PositionWiseFeedForward (`burn::nn::transformer::PositionWiseFeedForward`):
         Linear(d_model, d_ff) -> GELU -> dropout -> Linear(d_ff, d_model)
  -> final LayerNorm(d_model) -> Linear head(d_model, vocab)
  -> `burn::nn::loss::CrossEntropyLoss` over the [batch*seq, vocab] logits (log_softmax, gather,
     mean over the batch*seq rows; no weights, no padding tokens, no label smoothing).
  The step: forward + loss + backward + one Adam update (`AdamConfig::new()`, learning rate 1e-4)
  on one fixed random batch reused every step, then a device synchronize; the loss is not read
  inside the timed step.

Sizes (TransformerSize::DESIGN, the defaults here): 6 layers, d_model 512, 8 heads, d_ff = 4 *
d_model = 2048, seq 256, batch 32, vocab 76: 19,124,300 parameters.

Why it matches the Burn model (Burn 0.21 defaults, read from the burn-nn / burn-optim /
burn-backend 0.21.0 sources)
  - MultiHeadAttentionConfig: min_float = -1.0e4 (masked scores are set to -10000, not -inf),
    quiet_softmax = false, dropout on the scaled scores before masking; Linear bias = true.
  - TransformerEncoderConfig: dropout default 0.1 (the project keeps 0.1), activation
    ActivationConfig::Gelu = `Gelu::new()` = the exact erf GELU (not the tanh approximation),
    layer_norm_eps = 1e-5; the same dropout probability is used on the attention scores, on the
    attention output, inside the feed-forward block (after GELU) and on its output.
  - LayerNormConfig: epsilon = 1e-5 (the final norm too), gamma ones, beta zeros.
  - CrossEntropyLossConfig::new(): logits = true, weights / pad_tokens / smoothing = None.
  - AdamConfig::new(): beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-5 (PyTorch's default is 1e-8:
    this script passes 1e-5), amsgrad off, no weight decay, no gradient clipping. Burn adds
    epsilon * sqrt(1 - beta_2^t) to sqrt(v) before dividing m * sqrt(1 - beta_2^t) / (1 - beta_1^t),
    which is algebraically PyTorch's update with the same epsilon.
  - Dropout: x * Bernoulli(1 - p) / (1 - p), skipped entirely when p = 0 (the same here).
  - Initialization (affects the loss, not the time): Linear weights and biases uniform in
    +-1/sqrt(fan_in) and Embedding N(0, 1) in both frameworks.
  - The positions are embedded as a [batch, seq] index tensor (arange, repeated over the batch)
    and the causal mask is built as a [batch, seq, seq] bool tensor every step, as Burn does.
  The parameter count is checked against the Burn model's, counted from the sizes
  (`params` vs `params_burn` in the output; a mismatch aborts the run).

The rows
--------
  --model explicit --attention math (default): the model above, module for module and op for
      op as Burn runs it.
  --model explicit --attention sdpa: the same modules, but attention through
      torch.nn.functional.scaled_dot_product_attention(is_causal=True, dropout_p=p), which drops
      out the attention *weights* (after the softmax) inside a fused kernel: what PyTorch
      users run.
  --model nn: nn.TransformerEncoderLayer(norm_first=True, activation="gelu", batch_first=True,
      dropout=p) x layers (nn.TransformerEncoder) + the same embeddings, final LayerNorm and head:
      the model a PyTorch user would write (packed q/k/v projection, attention dropout after the
      softmax, the same parameter count).
  --dtype f32: f32 parameters and activations with TF32 matmuls
      (torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn.allow_tf32 = True).
  --dtype bf16: torch.autocast(device, dtype=torch.bfloat16) over forward + loss, f32 master
      weights and f32 Adam: what PyTorch users do.
  --dtype bf16-pure: parameters, activations, gradients and Adam state all in bf16 (model.to
      (torch.bfloat16)); closer to the project's bf16 contenders, whose parameters are bf16.
  --compile: the model wrapped in torch.compile (the loss and Adam stay eager); the compile
      happens during the warm-up steps.

Timing (the project's method): each step is synchronize, start time.perf_counter, zero_grad
(set_to_none=True), forward + loss + backward + optimizer step, synchronize, stop. Warm-up steps
(default 10) are not timed; the statistics are over the timed steps (default 30; the project
takes the median of at least 20). The loss of the last step is read once, after the loop.

Running
-------
  python3 benches/torch/transformer_step.py                       # DESIGN sizes, explicit/math, f32 tf32
  python3 benches/torch/transformer_step.py --dtype bf16 --dropout 0.0 --compile
  python3 benches/torch/transformer_step.py --all --budget-s 500 --label h100   # the whole matrix
  python3 benches/torch/transformer_step.py --device cpu --layers 2 --d-model 64 --heads 4 \\
      --seq 32 --batch 4 --steps 3 --warmup 1                    # smoke test without a GPU
`--all` runs, one after another in this process: explicit/math eager {f32, bf16} x {dropout 0.0,
0.1}; explicit/sdpa eager, the same four; nn eager, the same four; explicit/math compiled, the
same four; explicit/math eager bf16-pure at dropout 0.0 and 0.1. Each line is printed as soon as
its run ends; a failing run prints an `error=` line and the next one starts; once `--budget-s`
seconds have passed, each remaining run prints a `skipped=` line instead.

Output
------
One tab-separated line per run, starting with `torch-step`, then key=value fields:
  label           free text from --label
  model           explicit | nn
  attention       math | sdpa (explicit); nn-mha (nn: nn.MultiheadAttention, which runs SDPA)
  dtype           f32-tf32 | bf16-autocast | bf16-pure
  tf32            on (CUDA) | n/a-cpu
  matmul_precision  torch.get_float32_matmul_precision() after the TF32 flags: high = TF32
  compile         eager | compile
  dropout         the dropout probability of every dropout site
  final_norm      on | off
  batch seq layers d_model heads d_ff vocab   the sizes
  params          parameters of the PyTorch model; params_burn: the Burn model's, from the sizes
  adam            the torch.optim.Adam implementation (default: PyTorch's choice, foreach on CUDA)
  step_ms_median min max p10 p90   step time statistics over the timed steps, milliseconds
                  (p10/p90 linearly interpolated)
  tokens_per_s    batch * seq / median step time (the project's throughput unit)
  steps warmup    timed and warm-up step counts
  loss            mean cross-entropy of the last timed step (nats per character)
  peak_mem_mb     torch.cuda.max_memory_allocated over the run, MiB (n/a on CPU)
  torch           torch version; device: the device name
  error=...       instead of the statistics when the run failed; skipped=... when --budget-s ran out
"""

import argparse
import contextlib
import gc
import math
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Burn 0.21 defaults (see the module docstring).
BURN_MIN_FLOAT = -1.0e4  # MultiHeadAttentionConfig::min_float
BURN_LAYER_NORM_EPS = 1e-5  # LayerNormConfig::epsilon, TransformerEncoderConfig::layer_norm_eps
BURN_ADAM_BETAS = (0.9, 0.999)  # AdamConfig::beta_1, beta_2
BURN_ADAM_EPS = 1e-5  # AdamConfig::epsilon (PyTorch's default is 1e-8)
LEARNING_RATE = 1e-4  # benches/src/workloads.rs STEP_LEARNING_RATE


def _dropout(x, p, training):
    # burn::nn::Dropout returns its input untouched when p == 0 (or outside autodiff).
    if p == 0.0 or not training:
        return x
    return F.dropout(x, p, training=True)


class BurnMha(nn.Module):
    """burn::nn::attention::MultiHeadAttention (self-attention, attention mask only)."""

    def __init__(self, d_model, heads, dropout, attention):
        super().__init__()
        assert d_model % heads == 0, "d_model must be a multiple of heads"
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.output = nn.Linear(d_model, d_model)
        self.heads = heads
        self.d_k = d_model // heads
        self.p = dropout
        self.attention = attention

    def _split(self, x, linear):
        b, s, _ = x.shape
        return linear(x).reshape(b, s, self.heads, self.d_k).transpose(1, 2)

    def forward(self, x, mask):
        b, s, d = x.shape
        q = self._split(x, self.query)
        k = self._split(x, self.key)
        v = self._split(x, self.value)
        if self.attention == "math":
            # attn_scores: matmul, div by sqrt(d_k), dropout on the scores.
            scores = q.matmul(k.transpose(-2, -1)) / math.sqrt(self.d_k)
            scores = _dropout(scores, self.p, self.training)
            # attn_weights: mask_fill(mask [b, 1, s, s], min_float), softmax over the last dim.
            scores = scores.masked_fill(mask.reshape(b, 1, s, s), BURN_MIN_FLOAT)
            weights = torch.softmax(scores, dim=-1)
            context = weights.matmul(v)
        else:
            context = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True
            )
        context = context.transpose(1, 2).reshape(b, s, d)
        return self.output(context)


class BurnPwff(nn.Module):
    """burn::nn::transformer::PositionWiseFeedForward with ActivationConfig::Gelu."""

    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.linear_inner = nn.Linear(d_model, d_ff)
        self.linear_outer = nn.Linear(d_ff, d_model)
        self.p = dropout

    def forward(self, x):
        x = F.gelu(self.linear_inner(x))  # exact (erf) GELU, as Gelu::new()
        x = _dropout(x, self.p, self.training)
        return self.linear_outer(x)


class BurnEncoderLayer(nn.Module):
    """burn::nn::transformer::TransformerEncoderLayer with norm_first = true."""

    def __init__(self, d_model, d_ff, heads, dropout, attention):
        super().__init__()
        self.mha = BurnMha(d_model, heads, dropout, attention)
        self.pwff = BurnPwff(d_model, d_ff, dropout)
        self.norm_1 = nn.LayerNorm(d_model, eps=BURN_LAYER_NORM_EPS)
        self.norm_2 = nn.LayerNorm(d_model, eps=BURN_LAYER_NORM_EPS)
        self.p = dropout

    def forward(self, x, mask):
        r = self.mha(self.norm_2(x), mask)
        x = x + _dropout(r, self.p, self.training)
        r = self.pwff(self.norm_1(x))
        return x + _dropout(r, self.p, self.training)


class ExplicitCharLm(nn.Module):
    """examples/transformer/src/model.rs CharLm, module for module."""

    def __init__(self, cfg, attention):
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab, cfg.d_model)
        self.positions = nn.Embedding(cfg.seq, cfg.d_model)
        self.layers = nn.ModuleList(
            BurnEncoderLayer(cfg.d_model, cfg.d_ff, cfg.heads, cfg.dropout, attention)
            for _ in range(cfg.layers)
        )
        self.norm = nn.LayerNorm(cfg.d_model, eps=BURN_LAYER_NORM_EPS) if cfg.final_norm else None
        self.head = nn.Linear(cfg.d_model, cfg.vocab)
        self.attention = attention

    def forward(self, tokens):
        b, s = tokens.shape
        positions = torch.arange(s, device=tokens.device).reshape(1, s).repeat(b, 1)
        x = self.tokens(tokens) + self.positions(positions)
        mask = None
        if self.attention == "math":
            # generate_autoregressive_mask: true above the diagonal (masked), expanded over batch.
            mask = torch.ones(s, s, dtype=torch.bool, device=tokens.device).triu(1)
            mask = mask.expand(b, s, s)
        for layer in self.layers:
            x = layer(x, mask)
        if self.norm is not None:
            x = self.norm(x)
        return self.head(x)


class NnCharLm(nn.Module):
    """The same sizes as a PyTorch user writes them, with nn.TransformerEncoderLayer."""

    def __init__(self, cfg):
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab, cfg.d_model)
        self.positions = nn.Embedding(cfg.seq, cfg.d_model)
        layer = nn.TransformerEncoderLayer(
            cfg.d_model,
            cfg.heads,
            cfg.d_ff,
            dropout=cfg.dropout,
            activation="gelu",
            layer_norm_eps=BURN_LAYER_NORM_EPS,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(cfg.d_model, eps=BURN_LAYER_NORM_EPS) if cfg.final_norm else None
        self.head = nn.Linear(cfg.d_model, cfg.vocab)

    def forward(self, tokens):
        s = tokens.shape[1]
        x = self.tokens(tokens) + self.positions(torch.arange(s, device=tokens.device))[None]
        mask = nn.Transformer.generate_square_subsequent_mask(s, device=tokens.device, dtype=x.dtype)
        x = self.encoder(x, mask=mask, is_causal=True)
        if self.norm is not None:
            x = self.norm(x)
        return self.head(x)


def burn_param_count(cfg):
    """Parameters of the Burn CharLm, counted from its sizes."""
    d, f, v, s = cfg.d_model, cfg.d_ff, cfg.vocab, cfg.seq
    embeddings = v * d + s * d
    attention = 4 * (d * d + d)  # query, key, value, output: weight + bias
    norms = 2 * 2 * d  # norm_1, norm_2: gamma + beta
    ffn = (d * f + f) + (f * d + d)  # linear_inner, linear_outer
    final_norm = 2 * d if cfg.final_norm else 0
    head = d * v + v
    return embeddings + cfg.layers * (attention + norms + ffn) + final_norm + head


def _quantile(sorted_xs, q):
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def _clean(value):
    return str(value).replace("\t", " ").replace("\n", " ").replace("\r", " ")


def _device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def _default_adam_impl(optimizer, device):
    """What torch.optim.Adam runs with foreach=None, fused=None (PyTorch's own choice)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach

        _, foreach = _default_to_fused_or_foreach(params, False, use_fused=False)
        return "foreach" if foreach else "for-loop"
    except Exception:  # noqa: BLE001 - private helper; fall back to the documented rule
        return "foreach" if device.type == "cuda" else "for-loop"


def _config_fields(cfg, device):
    return [
        ("label", cfg.label),
        ("model", cfg.model),
        ("attention", cfg.attention if cfg.model == "explicit" else "nn-mha"),
        ("dtype", {"f32": "f32-tf32", "bf16": "bf16-autocast", "bf16-pure": "bf16-pure"}[cfg.dtype]),
        ("tf32", "on" if device.type == "cuda" else "n/a-cpu"),
        ("matmul_precision", torch.get_float32_matmul_precision()),
        ("compile", "compile" if cfg.compile else "eager"),
        ("dropout", cfg.dropout),
        ("final_norm", "on" if cfg.final_norm else "off"),
        ("batch", cfg.batch),
        ("seq", cfg.seq),
        ("layers", cfg.layers),
        ("d_model", cfg.d_model),
        ("heads", cfg.heads),
        ("d_ff", cfg.d_ff),
        ("vocab", cfg.vocab),
    ]


def _emit(fields):
    print("torch-step\t" + "\t".join(f"{k}={_clean(v)}" for k, v in fields), flush=True)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_one(cfg, device):
    """Builds, warms up and times one configuration; returns the output fields."""
    if cfg.dtype == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise RuntimeError("bf16 autocast needs a CUDA device with bf16 support")
    torch.manual_seed(cfg.seed)
    if cfg.model == "explicit":
        model = ExplicitCharLm(cfg, cfg.attention)
    else:
        model = NnCharLm(cfg)
    params = sum(p.numel() for p in model.parameters())
    params_burn = burn_param_count(cfg)
    if params != params_burn:
        raise RuntimeError(f"parameter count {params} differs from the Burn model's {params_burn}")
    model = model.to(device)
    if cfg.dtype == "bf16-pure":
        model = model.to(torch.bfloat16)
    model.train()
    adam_kwargs = {}
    if cfg.adam_impl == "foreach":
        adam_kwargs["foreach"] = True
    elif cfg.adam_impl == "fused":
        adam_kwargs["fused"] = True
    elif cfg.adam_impl == "for-loop":
        adam_kwargs["foreach"] = False
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=LEARNING_RATE,
        betas=BURN_ADAM_BETAS,
        eps=BURN_ADAM_EPS,
        weight_decay=0.0,
        amsgrad=False,
        **adam_kwargs,
    )
    forward = torch.compile(model) if cfg.compile else model

    # One fixed random batch, reused every step.
    gen = torch.Generator(device="cpu").manual_seed(cfg.seed + 1)
    tokens = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq), generator=gen).to(device)
    targets = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq), generator=gen).to(device)
    flat_targets = targets.reshape(cfg.batch * cfg.seq)

    if cfg.dtype == "bf16":
        def autocast():
            return torch.autocast(device.type, dtype=torch.bfloat16)
    else:
        autocast = contextlib.nullcontext

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    times = []
    loss = None
    try:
        for step in range(cfg.warmup + cfg.steps):
            _sync(device)
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                logits = forward(tokens)
                b, s, v = logits.shape
                loss = F.cross_entropy(logits.reshape(b * s, v), flat_targets)
            loss.backward()
            optimizer.step()
            _sync(device)
            elapsed = time.perf_counter() - start
            if step >= cfg.warmup:
                times.append(elapsed * 1e3)
        final_loss = loss.item()
        peak = (
            f"{torch.cuda.max_memory_allocated(device) / 2**20:.1f}"
            if device.type == "cuda"
            else "n/a"
        )
        adam_impl = cfg.adam_impl
        if adam_impl == "default":
            adam_impl = f"default({_default_adam_impl(optimizer, device)})"
    finally:
        del forward, model, optimizer
        loss = logits = None
        if cfg.compile:
            try:
                torch._dynamo.reset()
            except Exception:  # noqa: BLE001 - best effort cleanup
                pass
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()

    xs = sorted(times)
    median = statistics.median(xs)
    return [
        ("params", params),
        ("params_burn", params_burn),
        ("adam", adam_impl),
        ("step_ms_median", f"{median:.3f}"),
        ("min", f"{xs[0]:.3f}"),
        ("max", f"{xs[-1]:.3f}"),
        ("p10", f"{_quantile(xs, 0.1):.3f}"),
        ("p90", f"{_quantile(xs, 0.9):.3f}"),
        ("tokens_per_s", f"{cfg.batch * cfg.seq / (median / 1e3):.0f}"),
        ("steps", cfg.steps),
        ("warmup", cfg.warmup),
        ("loss", f"{final_loss:.5f}"),
        ("peak_mem_mb", peak),
    ]


def run_and_print(cfg, device):
    head = _config_fields(cfg, device)
    tail = [("torch", torch.__version__), ("device", _device_name(device))]
    try:
        fields = run_one(cfg, device)
    except Exception as err:  # noqa: BLE001 - a failing row must not stop --all
        message = f"{type(err).__name__}: {err}"
        if len(message) > 600:
            message = message[:600] + "..."
        _emit(head + tail + [("error", message)])
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return False
    _emit(head + fields + tail)
    return True


def all_configs(cfg):
    """The matrix of --all, cheapest and most needed first."""

    def variant(**changes):
        c = argparse.Namespace(**vars(cfg))
        for key, value in changes.items():
            setattr(c, key, value)
        return c

    rows = []
    pairs = [(dtype, p) for dtype in ("f32", "bf16") for p in (0.0, 0.1)]
    for dtype, p in pairs:
        rows.append(variant(model="explicit", attention="math", dtype=dtype, dropout=p, compile=False))
    for dtype, p in pairs:
        rows.append(variant(model="explicit", attention="sdpa", dtype=dtype, dropout=p, compile=False))
    for dtype, p in pairs:
        rows.append(variant(model="nn", attention="math", dtype=dtype, dropout=p, compile=False))
    for dtype, p in pairs:
        rows.append(variant(model="explicit", attention="math", dtype=dtype, dropout=p, compile=True))
    for p in (0.0, 0.1):
        rows.append(
            variant(model="explicit", attention="math", dtype="bf16-pure", dropout=p, compile=False)
        )
    return rows


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Equal-work PyTorch reference for the project's transformer training step.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--model", choices=("explicit", "nn"), default="explicit")
    ap.add_argument("--attention", choices=("math", "sdpa"), default="math",
                    help="explicit model only: Burn's ops (math) or F.scaled_dot_product_attention")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--final-norm", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--dtype", choices=("f32", "bf16", "bf16-pure"), default="f32",
                    help="f32 with TF32 matmuls; bf16 autocast with f32 master weights; "
                         "bf16-pure: everything in bf16")
    ap.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    ap.add_argument("--adam-impl", choices=("default", "foreach", "fused", "for-loop"),
                    default="default", help="torch.optim.Adam implementation")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d-ff", type=int, default=None, help="default: 4 * d_model")
    ap.add_argument("--vocab", type=int, default=76)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--label", default="")
    ap.add_argument("--all", action="store_true", help="run the whole comparison matrix")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="with --all: skip the remaining runs once this many seconds have passed")
    cfg = ap.parse_args(argv)
    if cfg.d_ff is None:
        cfg.d_ff = 4 * cfg.d_model
    if cfg.steps < 1 or cfg.warmup < 0:
        ap.error("--steps must be at least 1 and --warmup at least 0")
    if not 0.0 <= cfg.dropout < 1.0:
        ap.error("--dropout must be in [0, 1)")
    return cfg


def main(argv=None):
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    device = torch.device(cfg.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("CUDA is not available: pass --device cpu (with small sizes) to smoke-test")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    # f32 runs use TF32 products on CUDA (the line says dtype=f32-tf32, tf32=on).
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    if not cfg.all:
        ok = run_and_print(cfg, device)
        sys.exit(0 if ok else 1)

    start = time.perf_counter()
    for row in all_configs(cfg):
        elapsed = time.perf_counter() - start
        if cfg.budget_s is not None and elapsed > cfg.budget_s:
            _emit(
                _config_fields(row, device)
                + [("torch", torch.__version__), ("device", _device_name(device)),
                   ("skipped", f"budget: {elapsed:.0f} s elapsed > {cfg.budget_s:g} s")]
            )
            continue
        run_and_print(row, device)


if __name__ == "__main__":
    main()
