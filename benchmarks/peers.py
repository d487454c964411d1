"""Peers: one FedAvg workload in a plain PyTorch loop, wirelessfl, Flower, pfl-research and FLGo.

The workload, identical everywhere: Fashion-MNIST's 60,000 training images split iid over 100 clients
(600 each), 10 clients sampled per round uniformly without replacement, each taking 10 local SGD steps
(batch 32, lr 0.05) from the global model on a fresh permutation of its data, plain FedAvg (the mean
of the 10 local models); the network is wirelessfl's ``small_cnn`` (copied below: 28,938 parameters);
one torch thread in every process, no evaluation inside the timed rounds. Every framework is fed the
local IDX files (no downloads). Frameworks:

* ``plain``: a sequential PyTorch loop, ``bare_fedavg_round`` of benchmarks/overhead_baseline.py;
* ``wirelessfl``: ``simulate()`` with ``scheduler.name = "uniform"`` (m = 10, without replacement),
  iid partition, no per-device records, no evaluation (``run.eval_at_start = false``; it loads the
  data itself, from its dataset cache after the first run);
* ``flower``: ``flwr.simulation.run_simulation`` with the message API (``ServerApp``/``ClientApp``,
  ``flwr.serverapp.strategy.FedAvg``) on Ray, one actor of one CPU, so clients train one after another
  as in every other column;
* ``pfl``: pfl-research's ``FederatedAveraging`` on its PyTorch backend (``SimulatedBackend``);
* ``flgo``: FLGo's ``fedavg`` on a benchmark made by ``gen_benchmark_from_file`` from the local
  tensors (its benchmark and task folders are written to a temporary folder at start-up).

Measurement. Each framework runs in a fresh subprocess (``peers.py --worker NAME --rounds R``) with
OMP_NUM_THREADS = MKL_NUM_THREADS = 1. The worker prints, at the end of every round, the wall clock
(``time.time()``) and the CPU seconds of its whole process tree: user + system time of the worker and
of every live descendant (Ray's raylet, GCS and actor processes for Flower), plus the children's
times those processes have reaped (psutil; without psutil, ``resource.getrusage`` of the worker and
its reaped children). A straight line is fitted to round-end time against round number over rounds
``skip+1 .. R`` (``skip`` = 3, or R // 4 if smaller): its slope is the marginal seconds per round (wall
and CPU); the start-up (wall and CPU) is launch to the end of round 1 minus one marginal round, i.e.
what it took to get ready to train, from interpreter start, imports, data and framework set-up to
round 1's warm-up. Frameworks are interleaved (for each repeat, each framework in turn) and min and
median over the repeats are reported. After the last timed round each worker reports the test
accuracy of its final model on the first 1,000 Fashion-MNIST test images (chance is 0.10), to show
that it really trained. A framework that is not installed is reported and skipped.

    python3 -m venv .venv-peers && . .venv-peers/bin/activate
    pip install torch==2.13.0 && pip install -e . && pip install -r benchmarks/peers-requirements.txt
    python benchmarks/peers.py                                   # all five, 3 repeats
    python benchmarks/peers.py --frameworks plain wirelessfl --rounds 20 --repeats 1
    python benchmarks/peers.py --worker flower --rounds 5        # one worker's raw JSON lines
"""
from __future__ import annotations

import argparse
import functools
import gzip
import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CLIENTS, PER_CLIENT, PER_ROUND, STEPS, BATCH, LR, TEST = 100, 600, 10, 10, 32, 0.05, 1000
DATA_DIR = os.environ.get("PEERS_DATA_DIR", "/usr/share/datasets/fashion-mnist")
MARK = "@@peers "
FRAMEWORKS = ("plain", "wirelessfl", "flower", "pfl", "flgo")
NEEDS = {"plain": ("torch",), "wirelessfl": ("wirelessfl",), "flower": ("flwr", "ray"), "pfl": ("pfl",),
         "flgo": ("flgo",)}
DISTRIBUTIONS = {"wirelessfl": "wirelessfl", "flower": "flwr", "pfl": "pfl", "flgo": "flgo"}
HERE = Path(__file__).resolve().parent


# --- shared: model, data, local training, reporting -------------------------------------------

def small_cnn():
    """wirelessfl's small_cnn on (1, 28, 28), 10 classes (wirelessfl/learning/models.py)."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )


@functools.lru_cache(maxsize=None)
def load_fmnist():
    """(x_train, y_train, x_test[:1000], y_test[:1000]) from the local IDX files, normalised as
    wirelessfl does ((x / 255 - 0.2860) / 0.3530)."""
    import torch

    def idx(name):
        with gzip.open(os.path.join(DATA_DIR, f"{name}-ubyte.gz"), "rb") as f:
            raw = f.read()
        shape = np.frombuffer(raw, ">u4", raw[3], 4).astype(int)
        return np.frombuffer(raw, np.uint8, offset=4 + 4 * raw[3]).reshape(shape)

    def images(name):
        return torch.from_numpy((idx(name)[:, None].astype(np.float32) / 255.0 - 0.2860) / 0.3530)

    def labels(name):
        return torch.from_numpy(idx(name).astype(np.int64))

    return (images("train-images-idx3"), labels("train-labels-idx1"),
            images("t10k-images-idx3")[:TEST], labels("t10k-labels-idx1")[:TEST])


@functools.lru_cache(maxsize=None)
def client_indices() -> np.ndarray:
    """The iid split: row c holds client c's 600 training indices."""
    return np.random.default_rng(0).permutation(CLIENTS * PER_CLIENT).reshape(CLIENTS, PER_CLIENT)


def local_batches(rng: np.random.Generator, indices: np.ndarray):
    """STEPS x BATCH indices: the first STEPS * BATCH of a fresh permutation of the client's data."""
    import torch

    return torch.from_numpy(indices[rng.permutation(indices.size)[:STEPS * BATCH]].reshape(STEPS, BATCH))


def local_sgd(model, x, y, batches) -> None:
    import torch
    import torch.nn.functional as F

    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for b in batches:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x[b]), y[b]).backward()
        opt.step()


def accuracy(model) -> float:
    import torch

    _, _, xt, yt = load_fmnist()
    with torch.no_grad():
        return float((model(xt).argmax(1) == yt).float().mean())


def tree_cpu() -> float:
    """CPU seconds (user + system) of this process and all its descendants, live or reaped."""
    try:
        import psutil
    except ImportError:
        import resource

        return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for f in ("ru_utime", "ru_stime"))
    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:  # exited meanwhile
            pass
    return total


def mark(round_no: int) -> None:
    print(MARK + json.dumps({"round": int(round_no), "t": time.time(), "cpu": tree_cpu()}), flush=True)


# --- workers: one per framework; each trains `rounds` rounds, calls mark() after each and returns
# --- the final model's test accuracy ---------------------------------------------------------

def worker_plain(rounds: int) -> float:
    import torch
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

    sys.path.insert(0, str(HERE))
    from overhead_baseline import bare_fedavg_round

    x, y, _, _ = load_fmnist()
    parts = client_indices()
    torch.manual_seed(0)
    model = small_cnn()
    params = parameters_to_vector(model.parameters()).detach()
    rng = np.random.default_rng(1)
    for r in range(1, rounds + 1):
        clients = rng.choice(CLIENTS, PER_ROUND, replace=False)
        params = bare_fedavg_round(model, params, (x, y), [local_batches(rng, parts[c]) for c in clients], LR, STEPS)
        mark(r)
    vector_to_parameters(params, model.parameters())
    return accuracy(model)


def worker_wirelessfl(rounds: int) -> float:
    from torch.nn.utils import vector_to_parameters

    from wirelessfl.config import from_dict
    from wirelessfl.experiments.run import simulate
    from wirelessfl.sim.run.runner import Run

    scenario = from_dict({
        "name": "peers", "seed": 0,
        "run": {"rounds": rounds, "eval_every_rounds": 10 ** 9, "eval_at_start": False, "record_devices": False,
                "threads": 1},
        "devices": {"count": CLIENTS},
        "scheduler": {"name": "uniform", "m": PER_ROUND, "sampling": "without_replacement"},
        "learning": {"dataset": "fashion_mnist", "data_dir": DATA_DIR, "model": "small_cnn", "partition": "iid",
                     "samples_per_device": PER_CLIENT, "local_steps": STEPS, "batch_size": BATCH, "lr": LR},
    })
    runs = []
    on_round = Run._on_round  # the hook the engine calls after every round (a timestamp, nothing else)

    def timed_on_round(self, rec):
        on_round(self, rec)
        runs[:] = [self]
        mark(rec.round + 1)

    Run._on_round = timed_on_round
    simulate(scenario, progress=False)
    model = small_cnn()
    vector_to_parameters(runs[0].learner.trainer.params, model.parameters())  # fails unless the same net
    return accuracy(model)


def _flower_train(msg, context):
    """Flower ClientApp train handler: load the global arrays, 10 local steps, reply with the model."""
    import torch
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

    torch.set_num_threads(1)
    x, y, _, _ = load_fmnist()
    cid = int(context.node_config["partition-id"])
    model = small_cnn()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    rng = np.random.default_rng([cid, int(msg.content["config"]["server-round"])])
    local_sgd(model, x, y, local_batches(rng, client_indices()[cid]))
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()),
                               "metrics": MetricRecord({"num-examples": PER_CLIENT})}), reply_to=msg)


def worker_flower(rounds: int) -> float:
    import torch
    from flwr.app import ArrayRecord
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import FedAvg
    from flwr.simulation import run_simulation

    # Ray's workers import this file as module `peers` (so the ClientApp they are sent pickles by reference)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    import peers

    client = ClientApp()
    client.train()(peers._flower_train)
    server = ServerApp()
    final = {}

    @server.main()
    def main(grid, context):
        torch.manual_seed(0)
        model = small_cnn()
        strategy = FedAvg(fraction_train=PER_ROUND / CLIENTS, fraction_evaluate=0.0, min_available_nodes=CLIENTS)

        def after_round(r, arrays):  # called before round 1 and after each round
            if r > 0:
                mark(r)

        result = strategy.start(grid=grid, initial_arrays=ArrayRecord(model.state_dict()), num_rounds=rounds,
                                evaluate_fn=after_round)
        model.load_state_dict(result.arrays.to_torch_state_dict())
        final["acc"] = accuracy(model)

    run_simulation(server_app=server, client_app=client, num_supernodes=CLIENTS,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": 1, "num_gpus": 0}})
    return final["acc"]


def worker_pfl(rounds: int) -> float:
    import torch
    import torch.nn.functional as F
    from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
    from pfl.aggregate.simulate import SimulatedBackend
    from pfl.callback.base import TrainingProcessCallback
    from pfl.data.dataset import Dataset
    from pfl.data.federated_dataset import FederatedDataset
    from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
    from pfl.metrics import Metrics, Weighted
    from pfl.model.pytorch import PyTorchModel

    class Net(torch.nn.Module):  # pfl's PyTorchModel wants loss() and metrics() on the module
        def __init__(self):
            super().__init__()
            self.net = small_cnn()

        def forward(self, x):
            return self.net(x)

        def loss(self, x, y, eval=False):
            self.eval() if eval else self.train()
            return F.cross_entropy(self(x), y)

        def metrics(self, x, y, eval=False):
            self.eval()
            with torch.no_grad():
                return {"loss": Weighted(float(F.cross_entropy(self(x), y, reduction="sum")), len(y))}

    class Marks(TrainingProcessCallback):
        def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
            mark(central_iteration + 1)
            return False, Metrics()

    x, y, _, _ = load_fmnist()
    parts = client_indices()
    rng = np.random.default_rng(1)
    queue: list = []

    def sample_user():  # 10 distinct users per round: one draw without replacement per 10 calls
        if not queue:
            queue.extend(rng.choice(CLIENTS, PER_ROUND, replace=False).tolist())
        return queue.pop()

    def user_data(uid):  # the user's data in a fresh order; pfl cuts it into batches in that order
        b = local_batches(rng, parts[uid]).reshape(-1)
        return Dataset((x[b], y[b]), user_id=str(uid))

    torch.manual_seed(0)
    net = Net()
    model = PyTorchModel(model=net, local_optimizer_create=torch.optim.SGD,
                         central_optimizer=torch.optim.SGD(net.parameters(), lr=1.0))  # x += mean delta
    backend = SimulatedBackend(training_data=FederatedDataset(user_data, sample_user), val_data=None)
    FederatedAveraging().run(
        algorithm_params=NNAlgorithmParams(central_num_iterations=rounds, evaluation_frequency=10 ** 9,
                                           train_cohort_size=PER_ROUND, val_cohort_size=0),
        backend=backend, model=model,
        model_train_params=NNTrainHyperParams(local_num_epochs=None, local_learning_rate=LR,
                                              local_batch_size=BATCH, local_num_steps=STEPS),
        model_eval_params=NNEvalHyperParams(local_batch_size=None),
        callbacks=[Marks()])
    return accuracy(net)


FLGO_CONFIG = '''# written by benchmarks/peers.py: the local Fashion-MNIST tensors and the shared small CNN
import torch.utils.data
import peers

_x, _y, _xt, _yt = peers.load_fmnist()
train_data = torch.utils.data.TensorDataset(_x, _y)


def get_model(*args, **kwargs):
    return peers.small_cnn()
'''


def worker_flgo(rounds: int) -> float:
    import flgo
    import flgo.algorithm.fedavg as fedavg
    from flgo.benchmark.toolkits.cv.classification import FromDatasetPipe

    # flgo 0.4.4 predates torch's check that a Subset overriding __getitem__ also defines __getitems__:
    # add the one torch's error message suggests (one sample at a time, what DataLoader did before)
    FromDatasetPipe.TaskDataset.__getitems__ = lambda self, indices: [self[i] for i in indices]

    sys.modules.setdefault("peers", sys.modules[__name__])  # the benchmark's config imports this module
    folder = tempfile.mkdtemp(prefix="peers-flgo-")
    try:
        os.chdir(folder)  # FLGo names the benchmark package by its path relative to the working folder
        sys.path.insert(0, folder)
        Path("config_src.py").write_text(FLGO_CONFIG)
        bmk = flgo.gen_benchmark_from_file("peers_fmnist", "config_src.py", target_path=folder,
                                           data_type="cv", task_type="classification")
        importlib.import_module(bmk).visualize = lambda *args, **kwargs: None  # its partition plot takes minutes
        task = os.path.join(folder, "task")
        flgo.gen_task({"benchmark": bmk, "partitioner": {"name": "IIDPartitioner", "para": {"num_clients": CLIENTS}}},
                      task_path=task)
        runner = flgo.init(task, fedavg, option={
            "num_rounds": rounds, "proportion": PER_ROUND / CLIENTS, "sample": "uniform", "aggregate": "uniform",
            "num_steps": STEPS, "batch_size": BATCH, "learning_rate": LR, "learning_rate_decay": 1.0,
            "train_holdout": 0.0, "eval_interval": -1, "gpu": [], "torch_num_threads": 1, "seed": 0,
            "no_log_console": True, "no_tqdm": True, "log_file": False})
        iterate = runner.iterate

        def timed_iterate():
            out = iterate()
            mark(runner.current_round)
            return out

        runner.iterate = timed_iterate
        runner.run()
        return accuracy(runner.model)
    finally:
        os.chdir(HERE)
        shutil.rmtree(folder, ignore_errors=True)


WORKERS = {"plain": worker_plain, "wirelessfl": worker_wirelessfl, "flower": worker_flower, "pfl": worker_pfl,
           "flgo": worker_flgo}


# --- driver ------------------------------------------------------------------------------------

def missing(name: str) -> str | None:
    absent = [m for m in NEEDS[name] if importlib.util.find_spec(m) is None]
    return f"not installed ({', '.join(absent)})" if absent else None


def version(name: str) -> str:
    try:
        return importlib.metadata.version(DISTRIBUTIONS.get(name, "torch"))
    except importlib.metadata.PackageNotFoundError:
        return "-"


def run_worker(name: str, rounds: int, timeout: float) -> dict:
    """Launch one worker; return its fitted start-up and per-round costs, or {"error": ...}."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0",
               FLWR_TELEMETRY_ENABLED="0", TQDM_DISABLE="1", PYTHONWARNINGS="ignore")
    launch = time.time()
    try:
        proc = subprocess.run([sys.executable, str(HERE / "peers.py"), "--worker", name, "--rounds", str(rounds)],
                              capture_output=True, text=True, env=env, timeout=timeout, cwd=HERE)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    rows = [json.loads(line[len(MARK):]) for line in proc.stdout.splitlines() if line.startswith(MARK)]
    marks = [r for r in rows if "round" in r]
    done = next((r for r in rows if "accuracy" in r), None)
    if proc.returncode != 0 or done is None or len(marks) != rounds:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-15:]
        return {"error": f"exit {proc.returncode}, {len(marks)}/{rounds} rounds:\n    " + "\n    ".join(tail)}
    skip = min(3, rounds // 4)
    r = np.array([m["round"] for m in marks], float)
    t = np.array([m["t"] - launch for m in marks])
    cpu = np.array([m["cpu"] for m in marks])  # CPU seconds since launch: the worker's tree started at 0
    wall = np.polyfit(r[skip:], t[skip:], 1)[0]
    cpu_round = np.polyfit(r[skip:], cpu[skip:], 1)[0]
    return {"startup": t[0] - wall, "startup_cpu": cpu[0] - cpu_round, "wall": wall, "cpu": cpu_round,
            "accuracy": done["accuracy"], "total": t[-1]}


def summarise(results: dict[str, list[dict]], skipped: dict[str, str]) -> str:
    def mm(values, fmt):
        return f"{fmt.format(min(values))} / {fmt.format(statistics.median(values))}"

    base = [x for x in results.get("plain", []) if "error" not in x]
    head = (f"{'framework':<11} {'version':<11} {'start-up s':>13} {'start-up CPU s':>15} {'CPU s/round':>15} "
            f"{'wall s/round':>15} {'CPU/round vs plain':>18} {'test accuracy':>13}")
    lines = [head, "-" * len(head)]
    for name in FRAMEWORKS:
        if name in skipped:
            lines.append(f"{name:<11} {'-':<11} {skipped[name]}")
            continue
        if name not in results:
            continue
        ok = [x for x in results[name] if "error" not in x]
        if not ok:
            lines.append(f"{name:<11} {version(name):<11} failed: {results[name][0]['error']}")
            continue
        ratio = "-"
        if base:
            ratio = (f"{min(x['cpu'] for x in ok) / min(x['cpu'] for x in base):.2f} / "
                     f"{statistics.median(x['cpu'] for x in ok) / statistics.median(x['cpu'] for x in base):.2f}")
        lines.append(f"{name:<11} {version(name):<11} {mm([x['startup'] for x in ok], '{:.2f}'):>13} "
                     f"{mm([x['startup_cpu'] for x in ok], '{:.2f}'):>15} {mm([x['cpu'] for x in ok], '{:.3f}'):>15} "
                     f"{mm([x['wall'] for x in ok], '{:.3f}'):>15} {ratio:>18} "
                     f"{mm([x['accuracy'] for x in ok], '{:.3f}'):>13}")
        if len(ok) < len(results[name]):
            lines.append(f"{'':<11} ({len(results[name]) - len(ok)} of {len(results[name])} runs failed: "
                         f"{next(x['error'] for x in results[name] if 'error' in x)})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    ap.add_argument("--rounds", type=int, default=15,
                    help="rounds per run (>= 8); 15 takes 8-9 minutes for all five on an idle 2-core machine")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600, help="seconds one worker may take")
    ap.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        import torch

        torch.set_num_threads(1)
        acc = WORKERS[args.worker](args.rounds)
        print(MARK + json.dumps({"accuracy": acc}), flush=True)
        return

    if args.rounds < 8:
        ap.error("--rounds must be >= 8 (the per-round cost is fitted over the rounds after the first few)")
    skipped = {n: why for n in args.frameworks if (why := missing(n))}
    todo = [n for n in args.frameworks if n not in skipped]
    print(f"{CLIENTS} clients x {PER_CLIENT} Fashion-MNIST images (iid), {PER_ROUND} a round without replacement, "
          f"{STEPS} SGD steps of {BATCH} at lr {LR}, small_cnn, FedAvg; {args.rounds} rounds x {args.repeats} "
          f"repeats, 1 torch thread; python {sys.version.split()[0]}, torch {version('plain')}, "
          f"{os.cpu_count()} CPUs, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    results: dict[str, list[dict]] = {n: [] for n in todo}
    started = time.time()
    for rep in range(1, args.repeats + 1):
        for name in todo:
            res = run_worker(name, args.rounds, args.timeout)
            results[name].append(res)
            if "error" in res:
                print(f"  repeat {rep} {name:<10} FAILED {res['error']}", flush=True)
            else:
                print(f"  repeat {rep} {name:<10} start-up {res['startup']:6.2f} s, {res['cpu']:.3f} CPU s/round, "
                      f"{res['wall']:.3f} s/round, run {res['total']:.1f} s, accuracy {res['accuracy']:.3f}",
                      flush=True)
    print(f"\n(min / median over {args.repeats} repeats; wall clock {time.time() - started:.0f} s; "
          f"load average now {' '.join(f'{v:.2f}' for v in os.getloadavg())})")
    print(summarise(results, skipped))


if __name__ == "__main__":
    main()
