"""One rank of the PyTorch side: a stage of the MLP under torch.distributed.pipelining.

The model is the one gpipe's plan describes (mlp_model.py): `layers` Linear layers, ReLU after
all but the last (or after every one, with --loss mse), cut evenly over the ranks; softmax
cross-entropy (or MSE against regression targets), plain SGD. Each rank is a
separate process on the gloo backend over loopback with one compute thread, as a user would
launch it with torchrun. Every step is timed on every rank (optimizer included); rank 0 writes
the result file (its step times, every rank's parameter count).
  python torch_stage.py --rank R --world K --port P --schedule GPIPE|1F1B --micro-batches M
                        --width W --classes C --layers L --batch B --steps N --out FILE
                        [--loss ce|mse]
"""
import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

import mlp_model


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--schedule", choices=["GPIPE", "1F1B"], required=True)
    parser.add_argument("--micro-batches", type=int, required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--classes", type=int, required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--loss", choices=["ce", "mse"], default="ce")
    return parser.parse_args()


def stage_module(args):
    """This rank's contiguous share of the layers, as one nn.Sequential."""
    modules = []
    for index in mlp_model.stage_layers(args.layers, args.world, args.rank):
        out_features = mlp_model.out_features(index, args.layers, args.width, args.classes,
                                              args.loss)
        modules.append(nn.Linear(args.width, out_features))
        if mlp_model.relu_after(index, args.layers, args.loss):
            modules.append(nn.ReLU())
    return nn.Sequential(*modules)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.rank)
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                            init_method=f"tcp://127.0.0.1:{args.port}",
                            timeout=datetime.timedelta(seconds=300))
    module = stage_module(args)
    parameters = sum(p.numel() for p in module.parameters())
    stage = PipelineStage(module, args.rank, args.world, torch.device("cpu"))
    schedule_class = ScheduleGPipe if args.schedule == "GPIPE" else Schedule1F1B
    # Mean reduction per micro-batch, and scale_grads (the default) divides the accumulated
    # gradients by M: the mini-batch mean, as gpipe's loss.
    loss_fn = F.mse_loss if args.loss == "mse" else F.cross_entropy
    schedule = schedule_class(stage, args.micro_batches, loss_fn=loss_fn)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)

    # Fixed data made once: the measured step is the pipeline, not data loading.
    inputs = torch.randn(args.batch, args.width)
    targets = (torch.randn(args.batch, args.width) if args.loss == "mse"
               else torch.randint(args.classes, (args.batch,)))
    first, last = args.rank == 0, args.rank == args.world - 1

    step_ms = []
    dist.barrier()
    for _ in range(args.steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        losses = []
        if first and last:
            schedule.step(inputs, target=targets, losses=losses)
        elif first:
            schedule.step(inputs)
        elif last:
            schedule.step(target=targets, losses=losses)
        else:
            schedule.step()
        optimizer.step()
        step_ms.append(1e3 * (time.perf_counter() - start))

    counts = [None] * args.world
    dist.all_gather_object(counts, parameters)
    if first:
        with open(args.out, "w") as out:
            json.dump({"step_ms": step_ms, "parameters_per_stage": counts,
                       "torch": torch.__version__, "threads": torch.get_num_threads()}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
