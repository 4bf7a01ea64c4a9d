"""PyTorch's ResNet-9 training step, the device check's reference on the same machine.

``python -m jaxinit.tools.accel_torch SPEC`` (SPEC as for `jaxinit.tools.accel_variant`): the network of
`jaxinit.models.resnet.ResNet9` at the plan's width (3 x 3 conv - BatchNorm - ReLU units, max pools, two
residual pairs, global max pool, bias-free head x 0.125), channels-last, bf16 autocast, cuDNN's own
algorithm search on (``cudnn.benchmark``), plain SGD on the cross-entropy. Two batch sizes: one member's
(the plan's batch) and all members' at once (``members x batch``: what cuDNN does with this network when
it is given the whole work in one call). One ``@accel`` line each, median and minimum of single timed
steps after a warm-up.
"""
from __future__ import annotations

import json
import os
import sys
import time

from jaxinit.tools.accel_plan import Plan
from jaxinit.tools.accel_variant import _median, emit

CHANNELS = (64, 128, 256, 512)


def resnet9(torch, width_mult: float, n_classes: int = 10):
    nn = torch.nn
    c0, c1, c2, c3 = (max(1, round(c * width_mult)) for c in CHANNELS)

    def unit(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.body = nn.Sequential(unit(c, c), unit(c, c))

        def forward(self, x):
            return x + self.body(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(unit(3, c0), unit(c0, c1), nn.MaxPool2d(2, ceil_mode=True), Residual(c1),
                                      unit(c1, c2), nn.MaxPool2d(2, ceil_mode=True), unit(c2, c3),
                                      nn.MaxPool2d(2, ceil_mode=True), Residual(c3))
            self.head = nn.Linear(c3, n_classes, bias=False)

        def forward(self, x):
            return self.head(torch.amax(self.body(x), dim=(2, 3))) * 0.125
    return Net()


def time_batch(torch, plan: Plan, batch: int, device: str, deadline_at: float) -> dict:
    net = resnet9(torch, plan.width_mult).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(batch, 3, plan.image_size, plan.image_size, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    t = time.perf_counter()
    for _ in range(plan.warmup + 2):             # cuDNN's algorithm search happens in the first calls
        step()
    sync()
    warmup_s = time.perf_counter() - t
    times = []
    for _ in range(plan.steps):
        if times and time.time() + 2 * max(times) > deadline_at:
            break
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    return {"record": "torch", "batch": batch, "warmup_s": warmup_s, "steps": len(times), "step_s": _median(times),
            "step_s_min": min(times), "peak_bytes": peak}


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    plan = Plan(**{k: tuple(x) if isinstance(x, list) else x for k, x in spec["plan"].items()})
    deadline_at = float(spec["deadline_at"])
    emit({"record": "started", "pid": os.getpid()})
    try:
        import torch
    except ImportError as err:
        emit({"record": "skipped", "reason": f"torch does not import ({err})"})
        return 0
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cudnn.benchmark = True
    emit({"record": "torch_version", "torch": torch.__version__, "device": device,
          "cudnn": torch.backends.cudnn.version() if device == "cuda" else None})
    for batch in (plan.batch_size, plan.batch_size * plan.members):
        emit(time_batch(torch, plan, batch, device, deadline_at))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
