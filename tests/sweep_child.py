"""Run a slow sweep into argv[1]; the SIGKILL tests kill this process mid-run.

``python sweep_child.py OUT`` sweeps the simulated SimBoard; ``python sweep_child.py OUT
twin`` sweeps the digital twin (slowed down in real time only, so the numbers are the
twin's) over the modes :func:`twin_modes` gives.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pandas as pd  # noqa: E402
from sim_backend import SimBoard  # noqa: E402

import powertrain as pt  # noqa: E402
from powertrain.backends import TwinBackend  # noqa: E402
from powertrain.profiling.sweep import profile  # noqa: E402


def twin_modes() -> pd.DataFrame:
    return pt.get_device("orin-nano").sample(16, seed=4)


class SlowTwin(TwinBackend):
    def run_minibatch(self) -> float:
        time.sleep(0.002)
        return super().run_minibatch()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "twin":
        backend = SlowTwin(pt.Twin("orin-nano", "resnet18", seed=7))
        profile(
            backend, twin_modes(), batch_size=16, n_minibatches=10, out=sys.argv[1], progress=False
        )
    else:
        modes = pd.DataFrame(
            {
                "cores": 4,
                "cpu_mhz": 1000.0,
                "gpu_mhz": [200.0 + 50 * i for i in range(24)],
                "mem_mhz": 2133.0,
            }
        )
        profile(
            SimBoard(sleep_s=0.001),
            modes,
            batch_size=8,
            n_minibatches=10,
            out=sys.argv[1],
            progress=False,
        )
