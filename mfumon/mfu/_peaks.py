"""THE peak table: dense FLOP/s per device and dtype, in match order, each figure with its source.

Rules for editing:
- Dense figures only. NVIDIA datasheets print tensor figures "with sparsity"; halve them and say so in notes.
- Per device as the framework sees it: per GPU (GB200, H100 NVL), per GCD (MI250X), per chip (TPU).
- Specific patterns before generic ones (H100 NVL/PCIe before any other H100, GB200 before B200); `names`
  holds real device names that must resolve to their entry, which `PeakTable` checks (no shadowing).
- Anything without a primary source goes into `unconfirmed`.
Figures come from /work/shared/reference/mfu_formulas.md §9; source URLs pin the commit that was read.
"""

from __future__ import annotations

from ._spec import DeviceSpec

_ME = "https://github.com/stas00/ml-engineering/blob/744d01e18b79/compute/accelerator/README.md"
_LT = "https://github.com/Lightning-AI/pytorch-lightning/blob/1526f8408e1f/src/lightning/fabric/utilities/throughput.py"
_CP = "https://github.com/mosaicml/composer/blob/003ec03f7c9a/composer/callbacks/speed_monitor.py"
_TT = "https://github.com/pytorch/torchtitan/blob/b5bcd76c66d0/torchtitan/tools/utils.py"
_LA = "https://github.com/cli99/llm-analysis/tree/d841e40aec8c/llm_analysis/gpu_configs"
_GS = "https://github.com/winston-zhang-orz/gpu-specs/blob/097f0fb34b75/specs.md"
_VR = "https://github.com/volcengine/verl/blob/02cf355f1796/verl/utils/flops_counter.py"
_MIG = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/ (Supported MIG Profiles)"
_HALVED = "Tensor figures are the datasheet's with-sparsity values halved."

# NVLink (issue 61: the figure an NCCL point-to-point link inside a node is judged against): the datasheet's per-GPU
# NVLink bandwidth is both directions added; a GPU sends at half of it to any other GPU its NVSwitch joins.
_NVL_HALF = "half the datasheet's bidirectional per-GPU NVLink figure (one direction, any pair through the NVSwitch)"
# Memory bandwidth (the MBU denominator): the vendor's datasheet or product page for each figure, and the
# secondary table it was read from (figures are peak device-memory bandwidth, per device as torch sees it).
_BW_V100 = "NVIDIA V100 datasheet, https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_BW_A10 = "NVIDIA A10 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/datasheet-new/nvidia-a10-datasheet.pdf"
_BW_A30 = "NVIDIA A30 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/data-center/products/a30-gpu/pdf/a30-datasheet.pdf"
_BW_A100 = "NVIDIA A100 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_BW_L40S = "NVIDIA L40S datasheet, https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
_BW_L4 = "NVIDIA L4 datasheet, https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"
_BW_H100 = "NVIDIA H100 product page (specifications), https://www.nvidia.com/en-us/data-center/h100/"
_BW_H200 = "NVIDIA H200 product page (specifications), https://www.nvidia.com/en-us/data-center/h200/"
_BW_B200 = (
    "NVIDIA DGX B200 datasheet (64 TB/s for 8 GPUs), https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet"
)
_BW_GB200 = "NVIDIA GB200 NVL72 page (576 TB/s for 72 GPUs), https://www.nvidia.com/en-us/data-center/gb200-nvl72/"
_BW_AMD = "AMD Instinct product page, https://www.amd.com/en/products/accelerators/instinct.html"
_AMD_MI300A = (
    "AMD Instinct MI300A specifications, https://www.amd.com/en/products/accelerators/instinct/mi300/mi300a.html"
)
_AMD_MI355X = (
    "AMD Instinct MI355X specifications, https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html"
)
_ME_MI355X = (
    "https://github.com/stas00/ml-engineering/blob/b9e29720eebd/compute/accelerator/README.md (note 22: AMD's "
    "dense figures; its 'with Structured Sparsity' ones are exactly 2x)"
)

# 2026 hardware (issue 53): vendor pages first, then the secondary transcriptions they were read through.
_NV_HGX = (
    "NVIDIA HGX page (8-GPU totals; tensor figures with sparsity, FP4 as 'sparse | dense'), "
    "https://www.nvidia.com/en-us/data-center/hgx/, as transcribed by fibermall.com/blog/?p=17161 and "
    "glennklockwood.com/garden/processors/B300"
)
_NV_DGX_B300 = "NVIDIA DGX B300 datasheet, https://resources.nvidia.com/en-us-dgx-systems/dgx-b300-datasheet"
_NV_GB200 = "NVIDIA GB200 NVL72 page (72-GPU totals), https://www.nvidia.com/en-us/data-center/gb200-nvl72/"
_NV_GB300 = "NVIDIA GB300 NVL72 page (72-GPU totals), https://www.nvidia.com/en-us/data-center/gb300-nvl72/"
_VERDA = "verda.com/blog/gb300-nvl72-architecture (per-GPU dense table for GB300, B300, B200; secondary)"
_GOOGLE_TPU7X = "Google Cloud TPU7x (Ironwood) documentation, https://docs.cloud.google.com/tpu/docs/tpu7x"
_GOOGLE_V6E = "Google Cloud TPU v6e documentation, https://docs.cloud.google.com/tpu/docs/v6e"
_AWS_TRN2 = (
    "AWS Neuron, Trainium2 architecture, "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trainium2.html"
)
_AWS_TRN3 = (
    "AWS Neuron 2.29.1, Trainium3 architecture, "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.29.1/about-neuron/arch/neuron-hardware/trainium3.html"
)
_INTEL_GAUDI3 = (
    "Intel Gaudi 3 AI accelerator white paper, "
    "https://www.intel.com/content/www/us/en/content-details/817486/intel-gaudi-3-ai-accelerator-white-paper.html; "
    "Intel, Hot Chips 2024 'Intel Gaudi 3 AI Accelerator' (spec table: BF16 and FP8 matrix 1835 TFLOPS, 3.67 TB/s)"
)
_BLACKWELL_ULTRA_INT8 = (
    "Blackwell Ultra cut INT8 tensor throughput (NVIDIA prints a few POPS for a whole 8-GPU HGX B300 against "
    "72 for HGX B200, and the per-GPU readings of it disagree), so no dense INT8 figure is taken"
)
_TRAINIUM_DEVICES = (
    "Per chip (8 NeuronCores). torch-neuronx counts logical NeuronCores as devices: 4 per chip at the default "
    "LNC=2, 8 at LNC=1, so send num_gpus in chips (or peak_flops_per_gpu for one logical core)."
)

_AMPERE_A100 = {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12}
_AMPERE_A10 = {"fp32": 31.2e12, "tf32": 62.5e12, "bf16": 125e12, "fp16": 125e12}
_HOPPER_SXM = {"fp32": 67e12, "tf32": 494.5e12, "bf16": 989e12, "fp16": 989e12, "fp8": 1979e12}
_CDNA3_MI300 = {"fp32": 163.4e12, "tf32": 653.7e12, "bf16": 1307.4e12, "fp16": 1307.4e12, "fp8": 2610e12}

DEFAULT_DEVICES: tuple[DeviceSpec, ...] = (
    # --- NVIDIA Volta / Turing: FP16 tensor cores only, no BF16 or TF32.
    DeviceSpec(
        key="v100s-pcie",
        patterns=(r"\bV100S\b",),
        names=("Tesla V100S-PCIE-32GB",),
        peaks={"fp32": 16.4e12, "fp16": 130e12},
        memory_bandwidth_bytes_per_second=1.134e12,
        memory_bandwidth_source=f"{_BW_V100} (1134 GB/s for V100S); {_GS}",
        source=f"{_GS}; {_LT}; {_CP}",
    ),
    DeviceSpec(
        key="v100-sxm2",
        patterns=(r"\bV100-SXM2\b",),
        names=("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"),
        peaks={"fp32": 15.7e12, "fp16": 125e12},
        memory_bandwidth_bytes_per_second=0.90e12,
        memory_bandwidth_source=f"{_BW_V100} (900 GB/s); {_LA}",
        nvlink_bandwidth_bytes_per_second=150e9,
        nvlink_bandwidth_source=f"{_BW_V100} (NVLink 300 GB/s); {_NVL_HALF}",
        source=f"{_LT}; {_CP}; {_LA}",
        notes="V100-SXM3 (DGX-2) is not matched: its clocks differ.",
    ),
    DeviceSpec(
        key="v100-pcie",
        patterns=(r"\bV100-PCIE\b",),
        names=("Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"),
        peaks={"fp32": 14e12, "fp16": 112e12},
        memory_bandwidth_bytes_per_second=0.90e12,
        memory_bandwidth_source=f"{_BW_V100} (900 GB/s); {_LA}",
        source=f"{_LT}; {_CP}; {_LA}",
    ),
    DeviceSpec(
        key="t4",
        patterns=(r"\bT4\b",),
        names=("Tesla T4",),
        peaks={"fp32": 8.1e12, "fp16": 65e12},
        source=f"{_LT}; {_CP}",
    ),
    # --- NVIDIA Ampere.
    DeviceSpec(
        key="a10g",
        patterns=(r"\bA10G\b",),
        names=("NVIDIA A10G",),
        peaks=_AMPERE_A10,
        memory_bandwidth_bytes_per_second=0.60e12,
        memory_bandwidth_source="AWS EC2 G5 (no NVIDIA A10G datasheet); " + _GS,
        source=f"{_LT} (a10g); {_GS}",
        notes="Disputed: Lightning uses 125 TFLOPS bf16 but llm-analysis uses 70 for the AWS A10G.",
        unconfirmed=frozenset({"tf32", "bf16", "fp16", "memory_bandwidth"}),
    ),
    DeviceSpec(
        key="a10",
        patterns=(r"\bA10\b",),
        names=("NVIDIA A10",),
        peaks=_AMPERE_A10,
        memory_bandwidth_bytes_per_second=0.60e12,
        memory_bandwidth_source=f"{_BW_A10} (600 GB/s); {_GS}",
        source=f"{_CP}; {_GS}",
    ),
    DeviceSpec(
        key="a30",
        patterns=(r"\bA30\b",),
        names=("NVIDIA A30",),
        peaks={"fp32": 10.3e12, "tf32": 82e12, "bf16": 165e12, "fp16": 165e12},
        memory_bandwidth_bytes_per_second=0.933e12,
        memory_bandwidth_source=f"{_BW_A30} (933 GB/s); secondary tables only were read",
        mig_slices=4,
        source=f"https://huggingface.co/hardware/a30 (fp32 10.32); secondary tables (165, 933 GB/s); {_MIG}",
        notes="No datasheet read: tensor figures and bandwidth appear only in secondary tables.",
        unconfirmed=frozenset({"fp32", "tf32", "bf16", "fp16", "memory_bandwidth"}),
    ),
    DeviceSpec(
        key="a6000",
        patterns=(r"\bA6000\b",),
        names=("NVIDIA RTX A6000",),
        peaks={"fp32": 38.7e12, "tf32": 77.4e12, "bf16": 154.85e12, "fp16": 154.85e12},
        source=f"{_TT} (bf16 154.85); {_LT} (fp32, tf32)",
        notes=f"{_HALVED} Lightning's 'bf16' 38.7 is the non-tensor FP32 figure and is not used. "
        "fp16 taken equal to bf16 (same tensor rate on GA102).",
    ),
    DeviceSpec(
        key="a100-sxm-80gb",
        patterns=(r"\bA100[- ]SXM\d?[- ]80GB\b",),
        names=("NVIDIA A100-SXM4-80GB",),
        peaks=_AMPERE_A100,
        memory_bandwidth_bytes_per_second=2.039e12,
        memory_bandwidth_source=f"{_BW_A100} (2,039 GB/s SXM 80GB); {_LA}; {_GS}",
        nvlink_bandwidth_bytes_per_second=300e9,
        nvlink_bandwidth_source=f"{_BW_A100} (NVLink 600 GB/s); {_NVL_HALF}",
        mig_slices=7,
        source=f"{_ME}; {_LT}; {_CP}; {_LA}; {_GS}; {_MIG}",
        notes="A100 has no FP8. ME lists 2.0 TB/s.",
    ),
    DeviceSpec(
        key="a100-sxm-40gb",
        patterns=(r"\bA100[- ]SXM\d?[- ]40GB\b",),
        names=("NVIDIA A100-SXM4-40GB",),
        peaks=_AMPERE_A100,
        memory_bandwidth_bytes_per_second=1.555e12,
        memory_bandwidth_source=f"{_BW_A100} (1,555 GB/s 40GB); {_ME}; {_LA}",
        nvlink_bandwidth_bytes_per_second=300e9,
        nvlink_bandwidth_source=f"{_BW_A100} (NVLink 600 GB/s); {_NVL_HALF}",
        mig_slices=7,
        source=f"{_ME}; {_LT}; {_CP}; {_LA}; {_MIG}",
        notes="A100 has no FP8.",
    ),
    DeviceSpec(
        key="a100-pcie-80gb",
        patterns=(r"\bA100 80GB PCIe\b", r"\bA100[- ]PCIE[- ]80GB\b"),
        names=("NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"),
        peaks=_AMPERE_A100,
        memory_bandwidth_bytes_per_second=1.935e12,
        memory_bandwidth_source=f"{_BW_A100} (1,935 GB/s PCIe 80GB); {_LA}; {_GS}",
        mig_slices=7,
        source=f"{_LA}; {_GS}; {_MIG}",
        notes="A100 has no FP8. ME lists 1.94 TB/s.",
    ),
    DeviceSpec(
        key="a100-pcie-40gb",
        patterns=(r"\bA100[- ]PCIE[- ]40GB\b",),
        names=("NVIDIA A100-PCIE-40GB",),
        peaks=_AMPERE_A100,
        memory_bandwidth_bytes_per_second=1.555e12,
        memory_bandwidth_source=f"{_BW_A100} (1,555 GB/s 40GB); {_ME}; {_LA}",
        mig_slices=7,
        source=f"{_ME}; {_LT}; {_CP}; {_LA}; {_MIG}",
        notes="A100 has no FP8.",
    ),
    # --- NVIDIA Ada: L40S before L40 before L4 (word boundaries already keep them apart).
    DeviceSpec(
        key="l40s",
        patterns=(r"\bL40S\b",),
        names=("NVIDIA L40S",),
        peaks={"fp32": 91.6e12, "tf32": 183e12, "bf16": 362e12, "fp16": 362e12, "fp8": 733e12},
        memory_bandwidth_bytes_per_second=0.864e12,
        memory_bandwidth_source=f"{_BW_L40S} (864 GB/s); {_ME}; {_GS}",
        source=f"{_ME}; {_GS}; {_TT}",
        notes=_HALVED,
    ),
    DeviceSpec(
        key="l40",
        patterns=(r"\bL40\b",),
        names=("NVIDIA L40",),
        peaks={"fp32": 90.5e12, "tf32": 90.5e12, "bf16": 181e12, "fp16": 181e12},
        source=_LT,
        notes="No FP8 or bandwidth figure in the sources read.",
    ),
    DeviceSpec(
        key="l4",
        patterns=(r"\bL4\b",),
        names=("NVIDIA L4",),
        peaks={"fp32": 30.3e12, "tf32": 60e12, "bf16": 121e12, "fp16": 121e12, "fp8": 242e12},
        memory_bandwidth_bytes_per_second=0.30e12,
        memory_bandwidth_source=f"{_BW_L4} (300 GB/s); {_GS}",
        source=f"{_LT}; {_GS}",
        notes=f"{_HALVED} (datasheet: 120 / 242 / 485 with sparsity).",
    ),
    # --- NVIDIA Hopper: NVL and PCIe before the generic H100 (= SXM); H200 before H20.
    DeviceSpec(
        key="h100-nvl",
        patterns=(r"\bH100 NVL\b",),
        names=("NVIDIA H100 NVL",),
        peaks={"fp32": 60e12, "tf32": 417.5e12, "bf16": 835e12, "fp16": 835e12, "fp8": 1670.5e12},
        memory_bandwidth_bytes_per_second=3.9e12,
        memory_bandwidth_source=f"{_BW_H100} (3.9 TB/s per GPU for H100 NVL); secondary only",
        mig_slices=7,
        source=f"{_TT} (835e12); sparse datasheet values quoted on jishuzhan.net (secondary), halved; {_MIG}",
        notes="Per GPU. Lightning's 1978.8 TFLOPS is a with-sparsity NVL-pair figure and is not used.",
        unconfirmed=frozenset({"fp32", "tf32", "fp8", "memory_bandwidth"}),
    ),
    DeviceSpec(
        key="h100-pcie",
        patterns=(r"\bH100\b.*\bPCIe\b", r"\bH100\b.*\bHBM2e\b"),
        names=("NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM2e"),
        peaks={"fp32": 51e12, "tf32": 378e12, "bf16": 756e12, "fp16": 756e12, "fp8": 1513e12},
        memory_bandwidth_bytes_per_second=2.0e12,
        memory_bandwidth_source=f"{_BW_H100} (2 TB/s PCIe; product brief PB-11133-001: over 2,000 GB/s); {_ME}; {_LA}",
        mig_slices=7,
        source=f"{_ME}; {_CP}; {_LA}; {_MIG}",
        notes=f"{_HALVED} HBM2e H100 is the PCIe card (Composer's rule). GS lists 2.048 TB/s.",
    ),
    DeviceSpec(
        key="h100-sxm",
        patterns=(r"\bH100\b",),
        names=("NVIDIA H100 80GB HBM3", "NVIDIA H100"),
        peaks=_HOPPER_SXM,
        memory_bandwidth_bytes_per_second=3.35e12,
        memory_bandwidth_source=f"{_BW_H100} (3.35 TB/s SXM); {_ME}; {_LA}",
        nvlink_bandwidth_bytes_per_second=450e9,
        nvlink_bandwidth_source=f"{_BW_H100} (NVLink 900 GB/s SXM); {_NVL_HALF}",
        mig_slices=7,
        source=f"{_ME}; {_CP}; {_LT}; {_LA}; {_MIG}",
        notes=f"{_HALVED} Any H100 not matched as NVL or PCIe is the SXM part (HBM3), as torchtitan does.",
    ),
    DeviceSpec(
        key="h200-sxm",
        patterns=(r"\bH200\b(?!.*\bNVL\b)",),
        names=("NVIDIA H200",),
        peaks=_HOPPER_SXM,
        memory_bandwidth_bytes_per_second=4.8e12,
        memory_bandwidth_source=f"{_BW_H200} (4.8 TB/s); {_ME}",
        nvlink_bandwidth_bytes_per_second=450e9,
        nvlink_bandwidth_source=f"{_BW_H200} (NVLink 900 GB/s SXM); {_NVL_HALF}",
        mig_slices=7,
        source=f"{_ME}; {_CP}; {_TT}; {_VR}; {_MIG}",
        notes=f"{_HALVED} 'NVIDIA H200' is taken as SXM (Composer). H200 NVL has no sourced figures here "
        "and is deliberately left unmatched: add it with an override file.",
    ),
    DeviceSpec(
        key="h20",
        patterns=(r"\bH20\b(?![- ]?3e\b)",),
        names=("NVIDIA H20",),
        peaks={"bf16": 148e12, "fp16": 148e12, "fp8": 296e12, "int8": 296e12},
        memory_bandwidth_bytes_per_second=4.0e12,
        memory_bandwidth_source="citsjtu2020/LLM-Prof hardware_spec.md (4022 GB/s, 96GB); no NVIDIA datasheet",
        mig_slices=7,
        source=f"{_TT} (148e12, citing Tom's Hardware); {_VR}; citsjtu2020/LLM-Prof hardware_spec.md (4022 GB/s)",
        notes="No NVIDIA first-hand spec. fp8 296 matches LLM-Prof's INT8 296. FP32/TF32 unknown. The 141 GB "
        "'H20-3e' (HBM3e, other bandwidth) is left unmatched, as H200 NVL is: add it with an override file.",
        unconfirmed=frozenset({"bf16", "fp16", "fp8", "int8", "memory_bandwidth", "mig_slices"}),
    ),
    # --- NVIDIA Blackwell and Blackwell Ultra: GB300 and GB200 before B300 and B200 (`\bB300\b` cannot match
    # "GB300" anyway: no word boundary between G and B).
    DeviceSpec(
        key="gb300",
        patterns=(r"\bGB300\b",),
        names=("NVIDIA GB300", "NVIDIA GB300 NVL"),
        peaks={
            "fp32": 80e12,
            "tf32": 1250e12,
            "bf16": 2500e12,
            "fp16": 2500e12,
            "fp8": 5000e12,
            "fp4": 15000e12,
        },
        memory_bandwidth_bytes_per_second=8.0e12,
        memory_bandwidth_source=f"{_NV_GB300} (576 TB/s for 72 GPUs); {_ME}",
        nvlink_bandwidth_bytes_per_second=900e9,
        nvlink_bandwidth_source=f"{_NV_GB300} (NVLink 130 TB/s for 72 GPUs: 1.8 TB/s each); {_NVL_HALF}",
        mig_slices=7,
        source=f"{_NV_GB300} (FP4 1,440 | 1,080 PF sparse | dense; FP8 720, BF16 360, TF32 180 PF with sparsity; "
        f"FP32 6 PF); {_ME} (GB300 row, note 24); {_VERDA}",
        lacks={"int8": _BLACKWELL_ULTRA_INT8},
        notes=f"Per GPU (a GB300 superchip holds two), the rack totals / 72. {_HALVED} FP4 15 PF is NVIDIA's "
        "dense figure (1,080 PF / 72). FP32 80 is ME's and Verda's (6 PF / 72 would be 83). FP64 is cut to about "
        "1.4 TF per GPU (not a dtype here). MIG slice count taken from GB200.",
        unconfirmed=frozenset({"fp32", "mig_slices"}),
    ),
    DeviceSpec(
        key="gb200",
        patterns=(r"\bGB200\b",),
        names=("NVIDIA GB200",),
        peaks={
            "fp32": 80e12,
            "tf32": 1250e12,
            "bf16": 2500e12,
            "fp16": 2500e12,
            "fp8": 5000e12,
            "fp4": 10000e12,
            "int8": 5000e12,
        },
        memory_bandwidth_bytes_per_second=8.0e12,
        memory_bandwidth_source=f"{_BW_GB200}; {_ME}",
        nvlink_bandwidth_bytes_per_second=900e9,
        nvlink_bandwidth_source=f"{_BW_GB200} (NVLink 130 TB/s for 72 GPUs: 1.8 TB/s each); {_NVL_HALF}",
        mig_slices=7,
        source=f"{_ME} (GB200 row: fp4 10000, int8 5000); {_NV_GB200} (FP4 1,440 PF, INT8 720 POPS with "
        f"sparsity, / 72); {_TT}; {_VR}; {_MIG}",
        notes=f"Per GPU (a GB200 superchip holds two). {_HALVED}",
    ),
    DeviceSpec(
        key="b300",
        patterns=(r"\bB300\b",),
        names=("NVIDIA B300 SXM6 AC", "NVIDIA B300"),
        peaks={
            "fp32": 75e12,
            "tf32": 1125e12,
            "bf16": 2250e12,
            "fp16": 2250e12,
            "fp8": 4500e12,
            "fp4": 14000e12,
        },
        memory_bandwidth_bytes_per_second=8.0e12,
        memory_bandwidth_source=f"{_ME} (B300 SXM, 8.00 TB/s); {_NV_DGX_B300}",
        nvlink_bandwidth_bytes_per_second=900e9,
        nvlink_bandwidth_source=f"{_NV_HGX} (HGX B300: NVLink 1.8 TB/s per GPU); {_NVL_HALF}",
        mig_slices=7,
        source=f"{_NV_HGX} (HGX B300: FP8 72, BF16 36, TF32 18 PF with sparsity, FP32 600 TF, for 8 GPUs); "
        f"{_NV_DGX_B300}; {_ME} (B300 row, note 21); {_VERDA}",
        lacks={"int8": _BLACKWELL_ULTRA_INT8},
        notes=f"HGX B300 (Blackwell Ultra) per GPU. {_HALVED} FP4 dense per GPU is quoted as 13.1 (105 PF / 8, HGX "
        "page), 13.5 (108 / 8), 14 (Verda's per-GPU table) and 15 PF (Blackwell Ultra at GB300 power): 14 is "
        "taken and flagged. FP32 600 TF / 8 = 75 (ME prints 80, GB300's figure). FP64 is cut to 1.25 TF (10 TF "
        "for 8; not a dtype here). MIG slice count taken from B200.",
        unconfirmed=frozenset({"fp4", "fp32", "mig_slices"}),
    ),
    DeviceSpec(
        key="b200",
        patterns=(r"\bB200\b",),
        names=("NVIDIA B200",),
        peaks={
            "fp32": 75e12,
            "tf32": 1125e12,
            "bf16": 2250e12,
            "fp16": 2250e12,
            "fp8": 4500e12,
            "fp4": 9000e12,
            "int8": 4500e12,
        },
        memory_bandwidth_bytes_per_second=8.0e12,
        memory_bandwidth_source=f"{_BW_B200}; {_ME}",
        nvlink_bandwidth_bytes_per_second=900e9,
        nvlink_bandwidth_source=f"{_BW_B200} (NVLink 14.4 TB/s for 8 GPUs: 1.8 TB/s each); {_NVL_HALF}",
        mig_slices=7,
        source=f"{_ME} (DGX B200 datasheet; fp4 9000, int8 4500); {_NV_HGX} (HGX B200: FP4 144 | 72 PF, "
        f"INT8 72 POPS with sparsity, FP32 600 TF, for 8 GPUs); {_TT}; {_VR}; {_MIG}",
        notes=f"HGX/DGX B200 per GPU. {_HALVED} FP32 600 TF / 8 = 75; ME's 80 is GB200's figure. FP64 37-40 TF "
        "(not a dtype here).",
        unconfirmed=frozenset({"fp32"}),
    ),
    # --- AMD Instinct.
    DeviceSpec(
        key="mi250x",
        patterns=(r"\bMI250X\b",),
        names=("AMD Instinct MI250X", "AMD Instinct MI250X/MI250"),
        peaks={"fp32": 23.95e12, "bf16": 191.5e12, "fp16": 191.5e12},
        memory_bandwidth_bytes_per_second=1.64e12,
        memory_bandwidth_source=f"{_BW_AMD} (3.2 TB/s per OAM, halved per GCD); {_ME}; {_LA}",
        source=f"{_ME}; {_LA}; {_TT} (191.5e12 per GCD)",
        notes="Per GCD (what torch sees): the OAM package's 383 bf16, 47.9 fp32 and 3.28 TB/s halved. "
        "ROCm's 'MI250X/MI250' name also covers the slower MI250 (362 bf16 per OAM).",
    ),
    DeviceSpec(
        key="mi300x",
        patterns=(r"\bMI300X\b",),
        names=("AMD Instinct MI300X",),
        peaks=_CDNA3_MI300,
        memory_bandwidth_bytes_per_second=5.3e12,
        memory_bandwidth_source=f"{_BW_AMD} (5.3 TB/s); {_ME}",
        source=_ME,
        notes="ME derives 1307.4 from 2100 MHz x 1216 cores; torchtitan uses 1300, verl and NeMo 1336.",
    ),
    DeviceSpec(
        key="mi325x",
        patterns=(r"\bMI325X\b",),
        names=("AMD Instinct MI325X",),
        peaks=_CDNA3_MI300,
        memory_bandwidth_bytes_per_second=6.0e12,
        memory_bandwidth_source=f"{_BW_AMD} (6 TB/s); {_ME}",
        source=f"{_ME} (compute equal to MI300X); {_TT}",
    ),
    DeviceSpec(
        key="mi300a",
        patterns=(r"\bMI300A\b",),
        names=("AMD Instinct MI300A",),
        peaks={"fp32": 122.6e12, "tf32": 490.3e12, "bf16": 980.6e12, "fp16": 980.6e12, "fp8": 1961.2e12},
        memory_bandwidth_bytes_per_second=5.3e12,
        memory_bandwidth_source=f"{_AMD_MI300A} (5.3 TB/s)",
        source=f"{_AMD_MI300A} (dense figures; the page's 'with structured sparsity' ones are 2x)",
        notes="The APU's 228 CUs against MI300X's 304 at the same 2100 MHz: 1307.4 x 228/304 = 980.6 bf16, which "
        "the datasheet prints.",
    ),
    DeviceSpec(
        key="mi355x",
        patterns=(r"\bMI355X\b",),
        names=("AMD Instinct MI355X",),
        peaks={
            "fp32": 157.3e12,
            "bf16": 2500e12,
            "fp16": 2500e12,
            "fp8": 5000e12,
            "int8": 5000e12,
            "fp4": 10100e12,
        },
        memory_bandwidth_bytes_per_second=8.0e12,
        memory_bandwidth_source=f"{_BW_AMD} (8 TB/s); {_ME}",
        source=f"{_AMD_MI355X} (dense); {_ME_MI355X} (int8 5000, fp4 10100); {_TT} (bf16)",
        lacks={"tf32": "AMD publishes no TF32 rate for CDNA 4 (MI355X)"},
        notes="AMD's MXFP4 10.1 PF carries no sparsity qualifier and is dense (ME note 22); its 'with Structured "
        "Sparsity' FP8/INT8 figures (10.1) are 2x the dense ones used here.",
    ),
    # --- Google TPU (per chip; names as JAX/torch_xla report the device kind).
    DeviceSpec(
        key="tpu-v4",
        patterns=(r"\bTPU v4\b",),
        names=("TPU v4",),
        peaks={"bf16": 275e12},
        source=f"{_TT}; {_LT}; {_ME}; PaLM (arXiv 2204.02311) uses 275 TFLOP/s per chip",
    ),
    DeviceSpec(
        key="tpu-v5e",
        patterns=(r"\bTPU v5 ?lite\b", r"\bTPU v5e\b"),
        names=("TPU v5 lite", "TPU v5e"),
        peaks={"bf16": 197e12},
        source=f"{_TT}; {_LT} (v5litepod); {_ME}",
    ),
    DeviceSpec(
        key="tpu-v5p",
        patterns=(r"\bTPU v5p\b", r"\bTPU v5$"),
        names=("TPU v5p", "TPU v5"),
        peaks={"bf16": 459e12},
        source=_TT,
    ),
    DeviceSpec(
        key="tpu-v6e",
        patterns=(r"\bTPU v6 ?lite\b", r"\bTPU v6e\b"),
        names=("TPU v6 lite", "TPU v6e"),
        peaks={"bf16": 918e12, "fp8": 918e12, "int8": 1836e12},
        source=f"{_TT}; {_GOOGLE_V6E} (918 BF16, 1836 INT8 per chip); {_GOOGLE_TPU7X} (v6e FP8 918 per chip); "
        f"{_ME} (TPU v6e row, note 13)",
        notes="Per chip (one TensorCore, one device). Trillium runs FP8 at its BF16 rate.",
    ),
    DeviceSpec(
        key="tpu7x",
        patterns=(r"\bTPU ?v?7x?\b",),
        names=("TPU7x", "TPU v7x", "TPU v7"),
        peaks={"bf16": 1153.5e12, "fp8": 2307e12},
        source=f"{_GOOGLE_TPU7X} (2307 BF16 and 4614 FP8 TFLOPs per chip; two TensorCores per chip); "
        f"{_TT} (v7: 2307e12 / 2 per TensorCore device); {_ME} (TPU v7x row, note 25)",
        lacks={
            "fp16": "Google publishes only BF16 and FP8 peaks for TPU7x (Ironwood)",
            "tf32": "Google publishes only BF16 and FP8 peaks for TPU7x (Ironwood)",
            "fp32": "Google publishes only BF16 and FP8 peaks for TPU7x (Ironwood)",
        },
        notes="Per device, i.e. per TensorCore: unlike v4/v5p (megacore), JAX shows each of a TPU7x chip's two "
        "TensorCores as its own device with device_kind 'TPU7x' (a v7x-8 slice is 4 chips, 8 devices), so "
        "Google's per-chip 2307 / 4614 are halved, as torchtitan does.",
    ),
    # --- Intel Gaudi (per chip: one HPU device).
    DeviceSpec(
        key="gaudi3",
        patterns=(r"\bGaudi(?:\(R\))? ?3\b", r"\bHL-325L?\b"),
        names=("GAUDI3", "Intel(R) Gaudi(R) 3 AI Accelerator", "HL-325L"),
        peaks={"bf16": 1835e12, "fp8": 1835e12},
        memory_bandwidth_bytes_per_second=3.67e12,
        memory_bandwidth_source=f"{_INTEL_GAUDI3} (3.67 TB/s)",
        source=_INTEL_GAUDI3,
        lacks={
            "fp16": "Intel publishes no FP16 matrix (MME) rate for Gaudi 3, only BF16 and FP8",
            "tf32": "Intel publishes no TF32 matrix (MME) rate for Gaudi 3, only BF16 and FP8",
            "fp32": "Intel publishes no FP32 matrix (MME) rate for Gaudi 3, only BF16 and FP8",
        },
        notes="Matrix (MME) peaks of the OAM part (HL-325L; torch's device name 'GAUDI3'). ME (note 19) finds "
        "shipping parts running the MME at 1600 MHz, i.e. 1677 TFLOPS, not the 1750 MHz behind 1835; the "
        "vendor's figure is kept, as for every other device. ME's fp32 229 / tf32 459 / fp16 459 were not found "
        "in Intel's published table and are not used. The PCIe card (HL-338) is not matched.",
    ),
    # --- AWS Trainium (per chip; see the notes on devices vs chips).
    DeviceSpec(
        key="trainium2",
        patterns=(r"\bTrainium ?2\b", r"\btrn2u?\b"),
        names=("Trainium2", "AWS Trainium2", "trn2", "trn2.48xlarge", "trn2u.48xlarge"),
        peaks={"fp32": 181e12, "tf32": 667e12, "bf16": 667e12, "fp16": 667e12, "fp8": 1299e12},
        memory_bandwidth_bytes_per_second=2.9e12,
        memory_bandwidth_source=f"{_AWS_TRN2} (96 GiB at 2.9 TB/s per chip)",
        source=f"{_AWS_TRN2} (1,299 FP8, 667 BF16/FP16/TF32, 181 FP32 TFLOPS per chip; 2,563 with sparsity); "
        f"{_ME} (Trainium2 row, note 11)",
        notes=_TRAINIUM_DEVICES,
    ),
    DeviceSpec(
        key="trainium3",
        patterns=(r"\bTrainium ?3\b", r"\btrn3\b"),
        names=("Trainium3", "AWS Trainium3", "trn3"),
        peaks={"fp32": 183e12, "tf32": 671e12, "bf16": 671e12, "fp16": 671e12, "fp8": 2517e12, "fp4": 2517e12},
        memory_bandwidth_bytes_per_second=4.9e12,
        memory_bandwidth_source=f"{_AWS_TRN3} (144 GiB at 4.9 TB/s per chip; the NKI guide says 4.7)",
        source=f"{_AWS_TRN3} (2,517 MXFP8/MXFP4, 671 BF16/FP16/TF32, 183 FP32 TFLOPS per chip; 2,517 "
        "FP16/BF16/TF32 with sparsity)",
        notes=f"{_TRAINIUM_DEVICES} fp8 and fp4 are AWS's MXFP8/MXFP4 (microscaled) rate, 2.52 PF as announced "
        "at re:Invent 2025.",
    ),
    # --- Huawei Ascend.
    DeviceSpec(
        key="ascend-910b",
        patterns=(r"\bAscend\s?910B",),
        names=("Ascend910B2", "Ascend 910B"),
        peaks={"bf16": 354e12, "fp16": 354e12},
        source=f"{_VR}; NVIDIA-NeMo/Automodel nemo_automodel/_transformers/mfu.py (354e12)",
        notes="Web pages disagree (256, 280, 320 TFLOPS); the frameworks' 354 is used.",
        unconfirmed=frozenset({"bf16", "fp16"}),
    ),
)
