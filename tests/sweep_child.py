"""Run a slow simulated sweep into argv[1]; the SIGKILL test kills this process mid-run."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pandas as pd  # noqa: E402
from sim_backend import SimBoard  # noqa: E402

from powertrain.profiling.sweep import profile  # noqa: E402

modes = pd.DataFrame(
    {
        "cores": 4,
        "cpu_mhz": 1000.0,
        "gpu_mhz": [200.0 + 50 * i for i in range(24)],
        "mem_mhz": 2133.0,
    }
)
profile(
    SimBoard(sleep_s=0.001), modes, batch_size=8, n_minibatches=10, out=sys.argv[1], progress=False
)
