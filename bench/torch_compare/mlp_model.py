"""The one model both sides run, and gpipe's plan text for it.

`layers` Linear layers of `width` features and SGD, with one of two heads (`loss`):
  "ce"   the last layer maps to `classes` logits, a ReLU after every layer but the last, softmax
         cross-entropy over class ids;
  "mse"  every layer is Linear + ReLU (the last one too, `width` outputs), mean squared error
         against `width` regression targets (gpipe's synthetic teacher data).
The layers are cut into K equal contiguous
groups, so a torch stage and a gpipe stage hold the same layers. Keeping the cut and the plan
here, beside each other, is what makes "same model" checkable: both sides print the parameter
count they actually built.
"""


def stage_layers(layers, stages, stage):
    """Indices of the Linear layers on `stage` (contiguous, as even as the division allows)."""
    return range(stage * layers // stages, (stage + 1) * layers // stages)


def out_features(index, layers, width, classes, loss="ce"):
    return classes if index == layers - 1 and loss == "ce" else width


def relu_after(index, layers, loss="ce"):
    """Whether layer `index` is followed by a ReLU."""
    return loss == "mse" or index != layers - 1


def parameter_count(layers, width, classes, loss="ce"):
    """Weights and biases of the whole model, as torch.nn.Linear and gpipe's linear count them."""
    return sum((width + 1) * out_features(i, layers, width, classes, loss) for i in range(layers))


def plan_text(*, layers, width, classes, stages, micro_batches, schedule, batch, steps,
              device, loss="ce"):
    """A gpipe plan for the model. device: "CPU", or "SIM" with every cost zero.

    remat NEVER because PyTorch's stages keep their activations (no recomputation, same FLOPs);
    explicit boundaries so the cut is the torch side's, not the balancer's.
    """
    body = []
    for i in range(layers):
        body.append(f'  layers {{ name: "fc{i}" linear {{ out_features: '
                    f'{out_features(i, layers, width, classes, loss)} }} }}')
        if relu_after(i, layers, loss):
            body.append(f'  layers {{ name: "act{i}" relu {{}} }}')
    boundaries = ", ".join(f'"fc{stage_layers(layers, stages, s).start}"'
                           for s in range(1, stages))
    schedule_name = {"GPIPE": "GPIPE", "1F1B": "ONE_F_ONE_B"}[schedule]
    runtime = "log_every: 0 threads: 1 timeouts { wait_seconds: 120 }"
    if device == "SIM":
        # Every op, the loss, the update and every transfer cost (next to) nothing: what is left
        # of the step time is the runtime's own work.
        runtime += (" device: SIM sim { peak_gflops: 1e12 loss_us: 0 optimizer_us: 0"
                    " link_latency_us: 0 link_gbps: 1e9 }")
    return f"""# Written by bench/torch_compare: the MLP that torch_stage.py runs.
name: "torch-compare"
model {{
  input {{ shape: [{width}] }}
{chr(10).join(body)}
  loss {{ {"mse {}" if loss == "mse" else "softmax_cross_entropy {}"} }}
}}
pipeline {{
  stages: {stages} micro_batches: {micro_batches} schedule: {schedule_name} remat: NEVER
  boundaries: [{boundaries}]
}}
training {{ global_batch: {batch} steps: {steps} seed: 1 optimizer {{ sgd {{ lr: 0.01 }} }} }}
data {{ synthetic {{ num_samples: {max(batch, 256)} }} }}
runtime {{ {runtime} }}
"""
