"""What both sides run: the shapes of the transformer block and of the two models, and the FLOP
counts MFU is computed from.

FLOPs are model FLOPs of the matrix products only, counted as gpipe's ForwardFlopsPerSample
counts them (layers/causal_self_attention.cc, layers/linear.cc): a product of [m, k] by [k, n]
is 2mkn; attention's scores and P v are counted over the full T x T (the masked half included,
the convention of REFERENCE.md's 2.89 TFLOP); layer norms, GELU, softmax, embeddings and the
loss count nothing. fwd+bwd = 3 x fwd (the backward is two products per forward product).
Per sample of T positions, d wide, vocabulary V, MLP 4d:
  block fwd = 2T·d·3d (qkv) + 2T²d (scores) + 2T²d (P v) + 2T·d·d (proj) + 2·2T·d·4d (MLP)
            = 24·T·d² + 4·T²·d
  model fwd = layers x block fwd + 2·T·d·V (the tied output head)
"""
import collections

Block = collections.namedtuple("Block", "batch positions width heads")
Block.__str__ = lambda b: f"{b.batch} x T {b.positions} x d {b.width}, {b.heads} heads"

# A GPT-style model as the plans write it: embedding, learned positions, pre-LN blocks, final
# LayerNorm, a bias-free head tied to the embedding, softmax cross-entropy, AdamW.
Model = collections.namedtuple(
    "Model", "name plan vocab width positions layers heads batch lr weight_decay")

# The 2048-wide block of issue 28 (bench/kernels_bench.cc times the same one).
BLOCK_GPU = Block(4, 2048, 2048, 16)
# A block small enough for a CPU smoke run.
BLOCK_CPU = Block(2, 128, 128, 4)

# examples/char_transformer/plan.pbtxt.
CHAR = Model("char_transformer", "examples/char_transformer/plan.pbtxt", vocab=256, width=64,
             positions=64, layers=8, heads=4, batch=32, lr=0.002, weight_decay=0.01)
# bench/gpt2_small/plan.pbtxt.
GPT2 = Model("gpt2_small", "bench/gpt2_small/plan.pbtxt", vocab=50304, width=768,
             positions=1024, layers=12, heads=12, batch=16, lr=0.0006, weight_decay=0.1)


def parse_block(text):
    """"B,T,D,H" -> Block; ValueError when H does not divide D."""
    batch, positions, width, heads = (int(v) for v in text.split(","))
    if min(batch, positions, width, heads) < 1 or width % heads:
        raise ValueError(f"--block takes B,T,D,H with H dividing D, got {text}")
    return Block(batch, positions, width, heads)


def block_forward_flops_per_sample(positions, width):
    return 24.0 * positions * width ** 2 + 4.0 * positions ** 2 * width


def block_step_flops(block):
    """fwd+bwd FLOPs of one call of the block on its whole batch."""
    return 3.0 * block.batch * block_forward_flops_per_sample(block.positions, block.width)


def model_step_flops(model):
    """fwd+bwd FLOPs of one training step on the global batch (the update counts nothing)."""
    per_sample = (model.layers * block_forward_flops_per_sample(model.positions, model.width)
                  + 2.0 * model.positions * model.width * model.vocab)
    return 3.0 * model.batch * per_sample
