"""A slow power-limit x locked-clock sweep on a fake NVML whose settings live in a file;
the signal tests stop this process mid-sweep and read the file to see what it left on
the "GPU".

``python nvml_child.py OUT GPU_FILE``
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_profiling_nvml import FileNvml, Step  # noqa: E402

from powertrain.backends.nvml import NvmlBackend  # noqa: E402
from powertrain.profiling.sweep import profile  # noqa: E402


class SlowStep(Step):
    def __call__(self, batch_size: int, num_workers: int = 0) -> float:
        time.sleep(0.01)
        return super().__call__(batch_size, num_workers)


if __name__ == "__main__":
    out, gpu_file = sys.argv[1], Path(sys.argv[2])
    nvml = FileNvml(gpu_file)
    with NvmlBackend(
        SlowStep(), nvml=nvml, sample_period_s=0.005, proc_root=out + ".proc",
        allow_power_limit=True, allow_clocks=True,
    ) as b:  # fmt: skip
        limits = [150 + 10 * i for i in range(40)]
        modes = b.modes([2, 4], threads=[1], power_limits_w=limits, gpu_clocks_mhz=[1410, 990])
        profile(b, modes, n_minibatches=3, out=out, progress=False)
