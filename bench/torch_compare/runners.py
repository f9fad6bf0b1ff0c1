"""Launching one measured run on each side, under the same conditions, with a hard time limit.

Both sides get K processes on this machine, one compute thread each (OMP/MKL/OpenBLAS = 1), no
CPU binding (mpirun binds ranks to cores when K <= cores, and Python processes are unbound, so
gpipe's ranks are unbound here too), and every process runs under `timeout`. A run returns the
per-step times after warm-up; a failure raises RunError with the command and its log's tail.
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import mlp_model

HERE = os.path.dirname(os.path.abspath(__file__))
TIME_LIMIT_S = 600


class RunError(Exception):
    pass


def one_thread_env():
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               # gloo over loopback only.
               GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONWARNINGS="ignore")
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, lines=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_all(procs, cell):
    """Waits for every rank; once one fails, ends the others (they would wait on it in gloo
    until the process group's timeout). Returns the failures' descriptions."""
    failures = []
    pending = dict(enumerate(procs))
    while pending:
        for rank, (proc, log, command) in list(pending.items()):
            code = proc.poll()
            if code is None:
                continue
            del pending[rank]
            log.close()
            if code != 0:
                reason = "timed out" if code in (124, 137) else f"exited {code}"
                failures.append(f"torch rank {rank} of {cell} {reason}:\n  "
                                f"{' '.join(command)}\n" + tail(log.name))
        if failures:
            for proc, log, _ in pending.values():
                proc.terminate()  # `timeout` passes it on to the Python process
            for proc, log, _ in pending.values():
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                log.close()
            break
        time.sleep(0.2)
    return failures


def torch_run(cell, model, steps, warmup, workdir):
    """Median ms/step of PyTorch's pipeline, and its per-stage parameter counts."""
    out = os.path.join(workdir, "torch.json")
    if os.path.exists(out):
        os.remove(out)
    port = free_port()
    procs = []
    for rank in range(cell.stages):
        log = open(os.path.join(workdir, f"torch.r{rank}.log"), "w")
        command = ["timeout", "--kill-after=10", str(TIME_LIMIT_S), sys.executable,
                   os.path.join(HERE, "torch_stage.py"), "--rank", str(rank),
                   "--world", str(cell.stages), "--port", str(port),
                   "--schedule", cell.schedule, "--micro-batches", str(cell.micro_batches),
                   "--width", str(model.width), "--classes", str(model.classes),
                   "--layers", str(model.layers), "--batch", str(model.batch),
                   "--steps", str(warmup + steps), "--out", out, "--loss", model.loss]
        procs.append((subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       env=one_thread_env(), cwd=HERE), log, command))
    failures = wait_all(procs, cell)
    if failures:
        raise RunError("\n".join(failures))
    with open(out) as f:
        result = json.load(f)
    return statistics.median(result["step_ms"][warmup:]), result


def gpipe_parameters(bin_dir, plan_path, workdir):
    """Parameters per stage as gpipe itself counts them (gpipe-plan check)."""
    log = os.path.join(workdir, "check.log")
    with open(log, "w") as f:
        code = subprocess.call(["timeout", str(TIME_LIMIT_S), os.path.join(bin_dir, "gpipe-plan"),
                                "check", plan_path], stdout=f, stderr=subprocess.STDOUT)
    if code != 0:
        raise RunError(f"gpipe-plan check {plan_path} exited {code}:\n" + tail(log))
    return open(log).read()


def gpipe_run(cell, model, steps, warmup, workdir, bin_dir, device):
    """Median step_ms of gpipe from its metrics file (warm-up steps dropped)."""
    plan_path = os.path.join(workdir, f"plan-{device}.pbtxt")
    with open(plan_path, "w") as f:
        f.write(mlp_model.plan_text(layers=model.layers, width=model.width,
                                    classes=model.classes, stages=cell.stages,
                                    micro_batches=cell.micro_batches, schedule=cell.schedule,
                                    batch=model.batch, steps=warmup + steps, device=device,
                                    loss=model.loss))
    metrics = os.path.join(workdir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    command = ["timeout", "--kill-after=10", str(TIME_LIMIT_S),
               os.path.join(bin_dir, "gpipe-run"), "-n", str(cell.stages)]
    if cell.stages <= (os.cpu_count() or 1):
        # gpipe-run leaves binding to mpirun below the core count; unbind, as the torch side.
        command += ["--launcher-arg", "--bind-to", "--launcher-arg", "none"]
    command += [plan_path, "--metrics-out", metrics]
    log = os.path.join(workdir, f"gpipe-{device}.log")
    with open(log, "w") as f:
        code = subprocess.call(command, stdout=f, stderr=subprocess.STDOUT, env=one_thread_env())
    if code != 0:
        reason = "timed out" if code in (124, 137) else f"exited {code}"
        raise RunError(f"gpipe ({device}) {cell} {reason}:\n  {' '.join(command)}\n" + tail(log))
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if not r.get("eval")][warmup:]
    if not rows:
        raise RunError(f"gpipe ({device}) {cell}: no metrics after {warmup} warm-up steps")
    return statistics.median(r["step_ms"] for r in rows), plan_path


def new_workdir():
    return tempfile.mkdtemp(prefix="gpipe-torch-compare-")
