"""What dw knows and assumes of devices, each fact in one place.

``PEAK_FLOPS``: dense bf16 peak FLOP/s by device-name substring (vendor data
sheets), for the trainer's MFU.  The dry run plans GPU-hours at ``PLAN_MFU`` of
``PLAN_PEAK_FLOPS`` (an H100 SXM) per GPU, CPU-hours at ``PLAN_CPU_FLOPS`` per
process, and fits memory into ``GPU_MEMORY_GIB`` per GPU unless the launcher
says otherwise (``launcher.gpu_memory``; ``--mfu/--peak/--cpu-peak`` on the
command line).  No torch here.
"""

from __future__ import annotations

PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12, "V100": 125e12}

PLAN_PEAK_FLOPS = PEAK_FLOPS["H100"]  # per GPU, for the dry run's GPU-hours
PLAN_MFU = 0.40  # model FLOPs utilisation the dry run assumes
PLAN_CPU_FLOPS = 1e11  # fp32 FLOP/s per CPU process (a few cores' vector peak)
GPU_MEMORY_GIB = 80  # an 80 GB H100 / A100: the launchers' default launcher.gpu_memory
